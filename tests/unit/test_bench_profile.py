"""The bench reads each task's seconds from what ansible.posix.profile_tasks prints."""

from ansible_collections.ansible.posix.plugins.callback.profile_tasks import CallbackModule

from bench.methods import TASK_SECONDS

# profile_tasks pads a name to the terminal's width with dashes: a name longer than that
# leaves only the dashes before the seconds, two of them from 10 s on.
LONG = (
    "verl_debug.cluster.ray_firewall : Start the firewall, or load its rules again over a table"
    " changed behind its back"
)
TASKS = [
    (LONG, 14.2),
    (LONG + " again", 123.45),
    ("verl_debug.cluster.ray_python : Sync the venv with the lock", 29.66),
    ("verl_debug.cluster.ray_facts : Probe the node's Python, network, GPUs and files", 0.6),
]


class Display:
    columns = 80
    verbosity = 0

    def __init__(self) -> None:
        self.lines: list[str] = []

    def display(self, message: str) -> None:
        self.lines.append(message)

    def banner(self, message: str) -> None:
        self.lines.append(message)


def test_every_task_of_the_recap_is_read_whatever_its_name_and_seconds() -> None:
    callback = CallbackModule()
    callback._display = Display()
    callback.sort_order, callback.summary_only, callback.task_output_limit = True, False, None
    callback.stats = {
        str(number): {"name": name, "elapsed": seconds, "started": 0.0}
        for number, (name, seconds) in enumerate(TASKS)
    }
    callback.v2_playbook_on_stats(None)
    recap = "\n".join(callback._display.lines)
    read = [(name, float(seconds)) for name, seconds in TASK_SECONDS.findall(recap)]
    assert read == sorted(TASKS, key=lambda task: -task[1])
