"""Do the book's kernels use Unix sockets (no TCP port to collide on), and leave nothing behind?"""

from __future__ import annotations

import os

import nbformat

from parallel_budget.book import kernels


def test_myst_nb_kernels_run_over_ipc_and_clean_up(tmp_path):
    kernels.install()
    kernels.install()  # idempotent: no subclass of a subclass
    from myst_nb.core.execute import inline

    assert inline.ModifiedNotebookClient.__name__ == "IpcNotebookClient"
    assert inline.ModifiedNotebookClient.__mro__[1].__name__ == "ModifiedNotebookClient"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os; print(6 * 7)")])
    client = inline.ModifiedNotebookClient(nb, resources={"metadata": {"path": str(tmp_path)}}, timeout=120)
    km = client.create_kernel_manager()
    assert isinstance(km, kernels.IpcKernelManager)
    client.start_new_kernel()
    client.start_new_kernel_client()
    try:
        info = km.get_connection_info()
        assert info["transport"] == "ipc"
        sockets = [f"{info['ip']}-{info[k]}" for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
        assert all(os.path.exists(s) for s in sockets), sockets
        client.execute_cell(nb.cells[0], 0)
        assert nb.cells[0].outputs[0]["text"] == "42\n"
    finally:
        client._cleanup_kernel()
    assert not os.path.exists(km._socket_dir)
    assert not list(tmp_path.iterdir())  # no kernel-ipc-* files in the page's directory
