"""Does every lab run on real gloo processes and show what the package predicts?

Each lab runs once with 2 ranks (a few with 3 or 4); the checks are on the
structured facts each lab returns, not on its wording.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from parallel_budget.labs import LABS, LaunchConfig, live_processes, run_lab

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def lab(tmp_path):
    """run_lab with logs under tmp_path, checking that nothing survives the run."""

    def run(name, **kw):
        result = run_lab(name, log_dir=tmp_path, **kw)
        assert not result.is_failed(), result.text()
        assert live_processes(result.run_id) == []
        assert all(c == 0 for c in result.returncodes)
        return result

    return run


def test_two_rank_update_matches_single_process_only_without_bugs(lab):
    """Is the DDP step equal to the single-process step, and does each bug show a difference the package predicts?"""
    r = lab("two_rank_update")
    f = r.facts
    assert f["correct"]["local_grads"] == [2.0, 6.0]  # the lesson's gradients
    assert f["correct"]["weights"] == pytest.approx([0.6, 0.6])
    assert f["correct"]["max_abs_diff_reference"] < 1e-12
    for bug in ("duplicated", "average_twice", "uneven_tail", "sum"):
        assert f[bug]["max_abs_diff_reference"] > 1e-3, bug
    for v in f.values():  # the package predicts what DDP did, in every case
        assert v["max_abs_diff_predicted"] < 1e-12
        assert v["max_abs_diff_ranks"] == 0
    assert f["average_twice"]["predicted"] == pytest.approx(0.8)
    assert f["sum"]["predicted"] == pytest.approx(0.2)
    assert "预测" in r._repr_html_() and "实测" in r._repr_html_()


def test_ring_allreduce_counts_exact_bytes_on_three_ranks(lab):
    """Does the hand ring equal dist.all_reduce and send exactly 2(R-1)/R x G per rank?"""
    r = lab("ring_allreduce", ranks=3)
    f = r.facts
    assert f["max_abs_diff"] == 0
    assert f["predicted_send"] == 2 * 2 / 3 * f["bytes"]
    assert f["sent"] == [f["predicted_send"]] * 3 and f["received"] == [f["predicted_send"]] * 3
    assert f["t_ring"] >= f["lower_bound"] > 0
    assert all(row.ok for row in r.rows)


def test_overlap_measures_hidden_and_exposed_comm(lab):
    """Are compute, comm, step and waiting measured per bucket size and placed against step_time's two ends?"""
    r = lab("overlap", bucket_caps_mb=(0.25, 25.0), steps=3)
    cfgs = r.facts["configs"]
    assert [c["cap_mb"] for c in cfgs] == [0.25, 25.0]
    assert cfgs[0]["buckets"] > cfgs[1]["buckets"] == 1
    for c in cfgs:
        assert c["compute"] > 0 and c["comm"] > 0 and c["step"] > 0
        assert c["exposed"] + c["hidden"] >= min(c["comm"], c["exposed"]) - 1e-12
        assert c["predicted_no_overlap"] == pytest.approx(c["compute"] + c["comm"])
        assert c["predicted_full_overlap"] <= c["predicted_no_overlap"]


def test_zero_state_matches_zero1_prediction_to_the_byte(lab):
    """Is each rank's Adam state exactly zero_memory(P, R, stage, 4, 4, 8).optim_state?"""
    r = lab("zero_state")
    f = r.facts
    assert f["adam"]["moments"] == [8 * f["params"]] * 2
    assert f["zero1"]["moments"] == [4 * f["params"]] * 2
    assert f["zero1"]["total"] == [f["zero1"]["predicted_total"]] * 2
    assert f["max_abs_diff"] <= 1e-6


def test_tp_pp_tensor_parallel_exact_and_bubble_close(lab):
    """Do TP layers equal the full matmul, and is the pipeline's idle fraction near (p-1)/(m+p-1)?"""
    r = lab("tp_pp", microbatches=4)
    f = r.facts
    assert max(f["tp"].values()) < 1e-4
    assert f["bubble"] == pytest.approx(1 / 5)
    assert abs(f["idle_fraction"] - f["bubble"]) < 0.1
    assert len(f["idle"]) == 2


def test_late_rank_is_blamed(lab):
    """Is the slowed rank found as the one everybody waits for, with waits near straggler_wait's?"""
    r = lab("late_rank", slow_rank=0, delay_ms=120.0, steps=2)
    f = r.facts
    assert f["blamed"] == 0 and f["last"] == [0, 0]
    assert f["waits"][1] > 0.08  # rank 1 waited for most of rank 0's 120 ms
    assert f["waits"][1] == pytest.approx(f["predicted_waits"][1] + f["comm"], abs=0.06)


def test_hang_variants_detected_and_fixed_on_four_ranks(lab):
    """Is each hang detected within the timeout, naming ranks and the call, and does each fix complete?"""
    r = lab("hang", ranks=4, detect_timeout=0.5)
    phases = {(p["variant"], p["phase"]): p for p in r.facts["phases"]}
    for v in ("skip", "order", "data", "exit"):
        broken = phases[(v, "broken")]
        assert broken["detected_by"], v
        assert broken["seconds"] < 0.5 + 2.0
        msg = broken["messages"][0]
        assert "rank 3" in msg and "all_reduce" in msg, msg
        assert phases[(v, "fixed")]["completed"], v
    assert phases[("data", "fixed_drop_last")]["completed"]
    assert "已退出" in phases[("exit", "broken")]["messages"][0]
    assert phases[("exit", "broken")]["detected_by"] == [0, 1, 2]
    assert all(row.ok for row in r.rows)  # detected where check_collectives predicts the first mismatch
    # PyTorch's own diagnosis beside the ledger
    torch_rows = phases[("torch", "diagnosis")]
    assert all(d["raised"] and "mismatch" in d["message"] for d in torch_rows["detail"])
    assert "TensorShape=[1]" in torch_rows["detail"][0]["message"]
    assert "Ranks 3 failed to pass monitoredBarrier" in torch_rows["monitored"][0]["message"]
    text = r.text()
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in text and "monitored_barrier" in text
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" in text and "TORCH_NCCL_DUMP_ON_TIMEOUT" in text


def test_flight_recorder_names_exist_in_the_pinned_torch():
    """Are the NCCL variables the hang lab names spelt as in the installed torch's own headers?"""
    import re

    import torch

    from parallel_budget.labs.hang import NCCL_FLIGHT_RECORDER

    inc = Path(torch.__file__).parent / "include" / "torch" / "csrc" / "distributed" / "c10d"
    source = "".join(p.read_text(errors="replace") for p in inc.glob("*.hpp"))
    lib = b"".join(p.read_bytes() for p in (Path(torch.__file__).parent / "lib").glob("libtorch_cpu.so"))
    names = {n for line in NCCL_FLIGHT_RECORDER for n in re.findall(r"\b(TORCH_[A-Z_]+)", line)}
    assert {"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"} <= names
    for name in names:
        assert f'"{name}"' in source or name.encode() in lib, name


def test_checkpoint_refuses_mixed_steps_and_resumes(lab):
    """Does the loader refuse mixed steps and resume from the newest complete step to the same result?"""
    r = lab("checkpoint", steps=5, crash_step=4)
    f = r.facts
    assert f["naive"] == {"0": 4, "1": 3}
    assert "rank 0 是第 4 步" in f["refused"] and "rank 1 是第 3 步" in f["refused"]
    assert f["resume"] == 3
    assert f["restored_diff"] == 0 and f["final_diff"] == 0


def test_checkpoint_loader_functions(tmp_path):
    """Do scan/latest_complete_step ignore .tmp files and check_same_step name the ranks?"""
    import torch

    from parallel_budget.labs.checkpoint import (
        MixedCheckpointError, check_same_step, latest_complete_step, load_shard, save_shard,
    )

    for step in (1, 2):
        for rank in (0, 1):
            save_shard(tmp_path, step, rank, 2, torch.ones(2) * step, crash=(step == 2 and rank == 1))
    assert (tmp_path / "step-2-rank-1.pt.tmp").exists()
    assert latest_complete_step(tmp_path, 2) == 1
    with pytest.raises(MixedCheckpointError, match="rank 1 是第 1 步"):
        check_same_step({0: 2, 1: 1}, tmp_path, 2)
    assert check_same_step({0: 1, 1: 1}, tmp_path, 2) == 1
    assert load_shard(tmp_path, 1, 1, 2).tolist() == [1.0, 1.0]
    with pytest.raises(MixedCheckpointError, match="缺少 rank 1"):
        load_shard(tmp_path, 2, 1, 2)
    with pytest.raises(MixedCheckpointError, match="不符"):
        load_shard(tmp_path, 1, 1, 4)


def test_every_lab_is_covered():
    """Is every registered lab exercised by a test in this file?"""
    text = Path(__file__).read_text()
    assert all(f'lab("{name}"' in text for name in LABS)


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "no_such_lab"}, "lab"),
    ({"name": "floor", "ranks": 0}, "ranks"),
    ({"name": "floor", "ranks": 9}, "ranks"),
    ({"name": "floor", "ranks": 2.5}, "ranks"),
    ({"name": "floor", "ranks": True}, "ranks"),
    ({"name": "floor", "timeout": -1}, "timeout"),
    ({"name": "floor", "timeout": float("inf")}, "timeout"),
    ({"name": "hang", "variant": "deadlock"}, "variant"),
    ({"name": "hang", "detect_timeout": "1 s"}, "detect_timeout"),
    ({"name": "overlap", "bucket_caps_mb": "25"}, "bucket_caps_mb"),
    ({"name": "overlap", "bucket_caps_mb": (1, -2)}, "bucket_caps_mb"),
    ({"name": "tp_pp", "microbatches": 0}, "microbatches"),
    ({"name": "two_rank_update", "learning_rate": 0.1}, "learning_rate"),
    ({"name": "ring_allreduce", "ranks": 3, "numel": 1000}, "numel"),
    ({"name": "tp_pp", "ranks": 3, "hidden": 256}, "hidden"),
    ({"name": "late_rank", "slow_rank": 2}, "slow_rank"),
    ({"name": "checkpoint", "steps": 3, "crash_step": 4}, "crash_step"),
])
def test_bad_launch_arguments_name_the_field(kwargs, field):
    """Is a bad argument refused before any process starts, with a Chinese message naming it?"""
    name = kwargs.pop("name")
    with pytest.raises(ValueError, match=field) as info:
        LaunchConfig(lab=name, ranks=kwargs.pop("ranks", 2), timeout=kwargs.pop("timeout", 60.0), options=kwargs)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in str(info.value))


def test_result_renders_as_text_html_and_rows(lab):
    """Does a result show a Chinese table in text and HTML, with rows as dicts?"""
    r = lab("floor", keep_logs=True)
    assert "预测" in r.text() and "实测" in r.text() and "墙钟时间" in r.text()
    assert r._repr_html_().startswith("<div") and "<script" not in r._repr_html_()
    assert r.table()[0]["实测"] == "2"
    assert (r.run_dir / "0" / "stdout.log").exists() and (r.run_dir / "1" / "result.json").exists()
    assert "failed=False" in repr(r)


def test_ring_lab_runs_four_ranks_by_default(lab):
    """With R = 2 the ring factor is 1 and proves nothing: does the ring lab default to 4 ranks (1.5 G per rank)?"""
    assert LaunchConfig(lab="ring_allreduce").ranks == 4
    assert LaunchConfig(lab="hang").ranks == 2
    r = lab("ring_allreduce", repeats=1)
    assert r.ranks == 4
    assert r.facts["predicted_send"] == 1.5 * r.facts["bytes"] == r.facts["sent"][0]


def test_logs_are_deleted_after_success_and_kept_on_request_or_failure(tmp_path):
    """No log directory is left behind by a good run, unless asked; a failed run keeps its logs."""
    from parallel_budget.labs import LabError, LabTimeout

    ok = run_lab("floor", log_dir=tmp_path, timeout=180)  # generous: the shared 2-core machine is slow
    assert not ok.logs_kept and not ok.run_dir.exists() and str(ok.run_dir) not in ok.text()
    assert "日志已删除" in ok.text()
    kept = run_lab("floor", log_dir=tmp_path, keep_logs=True, timeout=180)
    assert kept.logs_kept and (kept.run_dir / "0" / "stdout.log").exists() and str(kept.run_dir) in kept.text()
    with pytest.raises(LabError) as info:
        run_lab("floor", log_dir=tmp_path, fail_rank=1, timeout=180)
    assert not isinstance(info.value, LabTimeout), str(info.value)
    assert info.value.result.logs_kept and (info.value.result.run_dir / "1" / "stderr.log").exists()


def test_every_report_records_torch_backend_and_device(lab):
    """Does the result (text and HTML) name the torch version, the backend and the device?"""
    import torch

    r = lab("floor")
    assert r.environment == {"torch": torch.__version__, "backend": "gloo", "device": "cpu"}
    for out in (r.text(), r._repr_html_()):
        assert f"torch {torch.__version__}" in out and "后端 gloo" in out and "设备 cpu" in out


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("RANK", None)
    return env


def test_torchrun_runs_a_lab_unchanged(tmp_path):
    """Does `python -m torch.distributed.run --standalone` run a lab module and print its table?"""
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "parallel_budget.labs.late_rank", "--delay-ms", "50", "--steps", "1"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "实验 6" in proc.stdout and "归因于 rank 1" in proc.stdout
    assert "后端 gloo" in proc.stdout and "torch " in proc.stdout


def test_module_command_line_launches_itself(tmp_path):
    """Does `python -m parallel_budget.labs.<lab> --ranks 2` start its own ranks and print the table?"""
    proc = subprocess.run(
        [sys.executable, "-m", "parallel_budget.labs.hang", "--ranks", "2", "--variant", "order"],
        cwd=tmp_path, env=dict(_env(), PB_LAB_LOG_DIR=str(tmp_path)), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "顺序不一致" in proc.stdout and "2 个 rank\uff0c完成" in proc.stdout


def test_options_survive_the_command_line():
    """Do options passed to run_lab reach the ranks unchanged through argv (lists, floats, bools)?"""
    from parallel_budget.labs import hang, overlap
    from parallel_budget.labs.runtime import options_to_argv, parse_cli, validate_options

    for module, given in ((overlap, {"bucket_caps_mb": (0.5, 25), "steps": 2}),
                          (hang, {"guard": False, "detect_timeout": 0.25, "variant": "exit"})):
        opts = validate_options(module.NAME, module.OPTIONS, given)
        _, parsed = parse_cli(module, options_to_argv(opts))
        assert parsed == opts


def _overlap_results(step, compute=0.010, forward=0.004, comm=0.004, buckets=(300, 100)):
    cfg = {"cap_mb": 1.0, "buckets": list(buckets), "compute": compute, "forward": forward, "step": step,
           "waiting": 0.001, "comm": comm}
    return [{"params": 400, "configs": [cfg]}] * 2


def test_overlap_flags_a_step_outside_its_predicted_range():
    """A step slower than 'no overlap' gets ✗ and a reason, and 暴露 never exceeds the standalone comm."""
    from parallel_budget.labs import overlap

    opts = {"layers": 8, "width": 256, "batch": 64}
    r = overlap.summarize(_overlap_results(step=0.0121), opts, 2)  # the 12.1 ms against <= 14 ms x 1.1
    assert r.rows[0].ok is True
    r = overlap.summarize(_overlap_results(step=0.0200), opts, 2)
    row, c = r.rows[0], r.facts["configs"][0]
    assert row.ok is False and "✗" in row.cells()[3] and "超出预测上限" in row.verdict
    assert c["exposed"] == pytest.approx(c["comm"]) and c["extra"] == pytest.approx(0.006)
    assert "通信之外的变慢" in row.measured
    r = overlap.summarize(_overlap_results(step=0.0050), opts, 2)
    assert r.rows[0].ok is False and "低于预测下限" in r.rows[0].verdict


def test_overlap_prediction_uses_backward_share_and_last_bucket():
    """The full-overlap end hides at most the measured backward and never the last bucket."""
    from parallel_budget.labs import overlap

    r = overlap.summarize(_overlap_results(step=0.012), {"layers": 8, "width": 256, "batch": 64}, 2)
    c = r.facts["configs"][0]
    assert c["backward_share"] == pytest.approx(0.6)
    assert c["last_bucket"] == pytest.approx(0.001)  # last bucket: 100 of 400 elements of 4 ms
    # hidden <= min(backward 6 ms, comm - last 3 ms) = 3 ms: 10 + 4 - 3 = 11 ms
    assert c["predicted_full_overlap"] == pytest.approx(0.011)


def test_no_built_page_publishes_a_machine_path(built_site):
    """Does no page of the site show a path of the machine that built it (/tmp/..., the repository)?"""
    import re
    import tempfile

    bad = re.compile("|".join(re.escape(p) for p in {"/tmp/", tempfile.gettempdir() + "/", str(ROOT) + "/"}))
    found = {}
    for page in built_site.rglob("*.html"):
        hits = bad.findall(page.read_text(encoding="utf-8", errors="replace"))
        if hits:
            found[str(page.relative_to(built_site))] = sorted(set(hits))
    assert found == {}, found


def test_reports_use_full_width_punctuation_in_chinese():
    """Do lab tables and notes put full-width punctuation next to Chinese, and leave code and numbers alone?"""
    from parallel_budget.labs.report import Report, Row, zh_punct

    assert zh_punct("隐藏 2.48 ms(通信的 48%);末尾等待 1 ms") == "隐藏 2.48 ms\uff08通信的 48%\uff09\uff1b末尾等待 1 ms"
    assert zh_punct('run_lab("hang", timeout=2)') == 'run_lab("hang", timeout=2)'
    text = Report("实验:标题", (Row("a,b", "预测:1", "实测(2)", "一致", True),), ("注意,这是备注",)).text()
    assert "实验\uff1a标题" in text and "预测\uff1a1" in text and "实测\uff082\uff09" in text and "注意\uff0c这是备注" in text
    assert "a,b" in text


def test_full_width_conversion_survives_a_space_after_the_mark():
    """A mark followed by a space next to Chinese (the late_rank notes have one) converts and drops the space."""
    from parallel_budget.labs.report import zh_punct

    assert zh_punct("等待, 然后: 完成") == "等待\uff0c然后\uff1a完成"
