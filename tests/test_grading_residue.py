"""Issue 31, items 2 and 4, through the real grade command: a poisoner and its classmates on the SAME worker.

``0poison`` is graded first (``--jobs 1``: one worker grades everyone in turn).  Its answer cell leaves
startup files that spoil every later kernel's answers (or kill it) (IPython startup, kernel config, sitecustomize,
usercustomize, .pth) inside folders it makes read-only or ``chmod 000``, a double-forked ``setsid`` daemon that
re-plants them and fills its uid's process allowance (the limit its function host used to share), SysV IPC,
``/dev/shm`` and an abstract socket.  Its classmates must score exactly as in a run without it, and the poisoner
itself is graded (a grade, not an infrastructure failure).
"""

from __future__ import annotations

import pytest

from grading_helpers import course_copy, scores

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
ONE = ("05-debugging",)

POISON = r'''
import ctypes, os, socket, sys, time
kill = "import os\nos._exit(0)\n"
# after every cell, every answer becomes 99: a later kernel that runs this scores 0 and exits 0 (no crash, no retry)
spoil = ("ip = get_ipython()\nip.events.register('post_execute', lambda: ip.user_ns.update("
         "{k: 99 for k in list(ip.user_ns) if not k.startswith('_') and k not in ('ip', 'get_ipython', 'exit', 'quit')}))\n")
rewrite = "hang_rank = 3\nhang_cause = 'Z'\n"
home = os.environ.get("HOME", "/tmp/home")
site = os.path.join(home, ".local/lib/python%d.%d/site-packages" % sys.version_info[:2])
startup = home + "/.ipython/profile_default/startup/00-spoil.py"
plants = {startup: spoil, "/tmp/.spoil.py": spoil,
          home + "/.ipython/profile_default/ipython_kernel_config.py":
              "c.InteractiveShellApp.exec_lines = [\"exec(open('/tmp/.spoil.py').read())\"]\n",
          site + "/usercustomize.py": kill, site + "/zz.pth": "import os; os._exit(0)\n",
          "/tmp/work/sitecustomize.py": kill, "/tmp/work/parallel_budget.py": rewrite, "/tmp/sitecustomize.py": kill,
          home + "/.bashrc": "exit 1\n", home + "/.profile": "exit 1\n"}
def plant():
    for path, text in plants.items():
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").write(text)
        except OSError:
            pass
plant()
# only the folders holding the files: IPython ignores an IPYTHONDIR it cannot write to
for d in (home + "/.ipython/profile_default/startup", site):
    try:
        os.chmod(d, 0o555)
    except OSError:
        pass
os.makedirs("/tmp/locked/x", exist_ok=True)
open("/tmp/locked/x/f", "w").write("x")
os.chmod("/tmp/locked/x", 0)
os.chmod("/tmp/locked", 0)
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget(0x5EED, 2**20, 0o1666); libc.semget(0x5EED, 1, 0o1666); libc.msgget(0x5EED, 0o1666)
try:
    open("/dev/shm/left", "wb").write(b"x" * 2**20)
except OSError:
    pass
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        s = socket.socket(socket.AF_UNIX); s.bind("\0pb-poison"); s.listen()
        for _ in range(200):  # every process the uid may have: its function host used to share them
            try:
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
            except OSError:
                break
        for _ in range(6000):
            plant()
            time.sleep(0.1)
        os._exit(0)
    os._exit(0)
time.sleep(0.5)
'''


def _class(course: Course, folder, poisoner: bool):
    synthetic.write_student(folder, "a", "lesson", synthetic.submission(course, "lesson"))
    synthetic.write_student(folder, "b", "lesson",
                            synthetic.submission(course, "lesson", {"answer_hang": "hang_rank = 0\nhang_cause = 'C'"}))
    if poisoner:
        synthetic.write_student(folder, "0poison", "lesson",
                                synthetic.submission(course, "lesson", {"answer_late": POISON}))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for name, poisoner in (("clean", False), ("poisoned", True)):
        course = Course(course_copy(tmp_path_factory.mktemp(name), ONE))
        folder = tmp_path_factory.mktemp(name + "-class")
        _class(course, folder, poisoner)
        summary = grade(folder, root=course.root, jobs=1, timeout=60, quiet=True)
        out[name] = (course, summary)
    return out


def test_classmates_after_a_poisoner_on_the_same_worker_score_as_in_a_clean_run(runs):
    """Do ``a`` and ``b``, graded after the poisoner by the same worker, get exactly their clean-run scores?"""
    clean, poisoned = scores(runs["clean"][0].gradebook), scores(runs["poisoned"][0].gradebook)
    mates = {k: v for k, v in poisoned.items() if k[0] != "0poison"}
    assert mates == clean and clean, (mates, clean)
    assert any(v[0] for k, v in clean.items() if k[0] == "a")  # the control: a's right answers score


def test_the_poisoner_is_graded_not_an_infrastructure_failure(runs):
    """The poisoner's own residue (its uid's process allowance exhausted) costs its grade, never 'not graded'."""
    course, summary = runs["poisoned"]
    assert summary["graded"] == ["0poison", "a", "b"] and not summary["failed"], summary
    assert {k: v for k, v in scores(course.gradebook).items() if k[0] == "0poison"}
