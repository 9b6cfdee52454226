"""Launch lines for the frameworks tenants run, per guest NUMA node, and the cloud-init document that sets them up.

Pure: no I/O. Built from the guest view (:mod:`vnuma.render.guestview`), so
the lines speak the guest's own node, CPU and GPU numbers:

* one process per guest node that holds GPUs (a VM spanning nodes gets one
  per node, tensor parallelism inside a node: ``--tensor-parallel-size`` =
  the node's GPU count), its GPUs made visible in guest PCI order
  (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, ``CUDA_VISIBLE_DEVICES`` = their
  :attr:`GuestDevice.cuda_index`, as the NCCL file's ``dev``), NCCL handed
  the topology file (``NCCL_TOPO_FILE``), and the process bound to the
  node by :func:`vnuma.render.guestview.numactl_words`;
* a VM without GPUs: one process per guest node with vCPUs, on the CPU
  backends (vLLM's and SGLang's CPU backend, llama.cpp, torchrun on CPU),
  with no CUDA or NCCL variable;
* each framework's own binding where it has one: vLLM's CPU backend
  ``VLLM_CPU_OMP_THREADS_BIND`` (the node's vCPUs), llama.cpp
  ``--numa numactl`` (keep the CPU set numactl gives), torchrun one agent
  per node forming one job (``--nnodes``/``--node-rank``) with
  ``--local-ranks-filter=0``.

Every name and value is shell-quoted (:func:`shlex.quote`); ``MODEL`` and
``SCRIPT.py`` are the tenant's to fill in.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vnuma.errors import OptionsError
from vnuma.render.guestview import GuestDevice, GuestView, numactl_words
from vnuma.topology import format_cpuset

NCCL_TOPO_PATH = "/etc/vnuma/nccl-topo.xml"
"""Where ``--cloud-init`` writes the NCCL topology file in the guest (and ``NCCL_TOPO_FILE`` points)."""
ENV_PATH = "/etc/profile.d/vnuma.sh"
"""Where ``--cloud-init`` writes the launch lines' environment in the guest."""


@dataclass(frozen=True, slots=True)
class LaunchNode:
    """What to run on one guest node: ``env`` then ``command``."""

    node: int | None
    """The guest node (None: GPUs the host gives no NUMA node; nothing is bound)."""
    cpus: tuple[int, ...]
    gpus: tuple[GuestDevice, ...]
    nics: tuple[GuestDevice, ...]
    env: tuple[tuple[str, str], ...]
    command: str

    def line(self) -> str:
        """The runnable line: the environment, then the command."""
        return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in self.env), self.command])


@dataclass(frozen=True, slots=True)
class _Slot:
    """One process of the job: its index among them, their count, the node, its CPUs and GPUs."""

    index: int
    count: int
    node: int | None
    cpus: tuple[int, ...]
    gpus: tuple[GuestDevice, ...]


def _vllm(slot: _Slot) -> tuple[list[str], dict[str, str]]:
    if not slot.gpus:  # the CPU backend: its OpenMP threads on the node's vCPUs
        return ["vllm", "serve", "MODEL", "--port", str(8000 + slot.index)], {
            "VLLM_CPU_OMP_THREADS_BIND": format_cpuset(slot.cpus)}
    return ["vllm", "serve", "MODEL", "--tensor-parallel-size", str(len(slot.gpus)),
            "--port", str(8000 + slot.index)], {}


def _sglang(slot: _Slot) -> tuple[list[str], dict[str, str]]:
    words = ["python3", "-m", "sglang.launch_server", "--model-path", "MODEL"]
    words += ["--tensor-parallel-size", str(len(slot.gpus))] if slot.gpus else ["--device", "cpu"]
    return [*words, "--port", str(30000 + slot.index)], {}


def _llama_cpp(slot: _Slot) -> tuple[list[str], dict[str, str]]:
    words = ["llama-server", "--model", "MODEL", "--numa", "numactl"]
    if slot.cpus:
        words += ["--threads", str(len(slot.cpus))]
    if slot.gpus:
        words += ["--n-gpu-layers", "999"]
    return [*words, "--port", str(8080 + slot.index)], {}


def _torchrun(slot: _Slot) -> tuple[list[str], dict[str, str]]:
    words = ["torchrun", f"--nproc-per-node={max(len(slot.gpus), 1)}", f"--nnodes={slot.count}"]
    if slot.count > 1:
        words += [f"--node-rank={slot.index}", "--master-addr=127.0.0.1", "--master-port=29500"]
    return [*words, "--local-ranks-filter=0", "SCRIPT.py"], {}


FRAMEWORKS: Mapping[str, Callable[[_Slot], tuple[list[str], dict[str, str]]]] = {
    "vllm": _vllm, "sglang": _sglang, "llama.cpp": _llama_cpp, "torchrun": _torchrun,
}
"""The frameworks ``--launch`` knows, each the command (words) and extra environment of one process."""


def check_framework(framework: str | None) -> None:
    """Raises:
        OptionsError: ``framework`` is neither None nor one of :data:`FRAMEWORKS`.
    """
    if framework is not None and framework not in FRAMEWORKS:
        raise OptionsError(f"unknown framework {framework!r} for --launch; choose one of: {', '.join(FRAMEWORKS)}")


def _bare(_slot: _Slot) -> tuple[list[str], dict[str, str]]:
    return [], {}


def launch_lines(view: GuestView, framework: str | None) -> tuple[LaunchNode, ...]:
    """One :class:`LaunchNode` per process ``framework`` runs on the guest of ``view``, in node order (None: no
    framework, the command is the binding alone — what ``--cloud-init`` without ``--launch`` writes).

    Raises:
        OptionsError: ``framework`` is not one of :data:`FRAMEWORKS`.
    """
    check_framework(framework)
    build = _bare if framework is None else FRAMEWORKS[framework]
    gpus = [d for d in view.devices if d.cuda_index is not None]
    if gpus:
        nodes = sorted({d.node for d in gpus}, key=lambda n: (n is None, n))
    else:
        nodes = [n.id for n in view.nodes if n.vcpus]
    slots = [
        _Slot(i, len(nodes), node, view.node(node).vcpus if node is not None else (),
              tuple(d for d in gpus if d.node == node))
        for i, node in enumerate(nodes)
    ]
    return tuple(_launch_node(view, slot, build) for slot in slots)


def _launch_node(view: GuestView, slot: _Slot, build: Callable[[_Slot], tuple[list[str], dict[str, str]]]
                 ) -> LaunchNode:
    words, own_env = build(slot)
    env = common_env(view)
    if slot.gpus:  # after CUDA_DEVICE_ORDER, which gives its numbers their meaning
        env = {"CUDA_DEVICE_ORDER": env.pop("CUDA_DEVICE_ORDER"),
               "CUDA_VISIBLE_DEVICES": ",".join(str(d.cuda_index) for d in slot.gpus), **env}
    env.update(own_env)
    bind = numactl_words(view, slot.node) if slot.node is not None else []
    nics = tuple(d for d in view.devices if d.kind == "nic" and d.node == slot.node)
    return LaunchNode(slot.node, slot.cpus, slot.gpus, nics, tuple(env.items()),
                      " ".join(shlex.quote(w) for w in bind + words))


def common_env(view: GuestView) -> dict[str, str]:
    """The environment every process on the guest shares: GPUs by PCI order and NCCL's topology file (none
    without GPUs)."""
    if not any(d.cuda_index is not None for d in view.devices):
        return {}
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_TOPO_FILE": NCCL_TOPO_PATH}


def as_launch_dict(view: GuestView, framework: str | None, lines: tuple[LaunchNode, ...]) -> dict[str, object]:
    """The ``--launch --json`` document: ``{"vm", "framework", "nodes": [{"node", "cpus", "gpus",
    "gpu_addresses", "nics", "env", "command", "line"}]}`` (``gpus``: CUDA indices; ``nics``: guest bus ids)."""
    return {
        "vm": view.vm,
        "framework": framework,
        "nodes": [
            {
                "node": n.node,
                "cpus": list(n.cpus),
                "gpus": [d.cuda_index for d in n.gpus],
                "gpu_addresses": [d.guest_address for d in n.gpus],
                "nics": [d.guest_address for d in n.nics],
                "env": dict(n.env),
                "command": n.command,
                "line": n.line(),
            }
            for n in lines
        ],
    }


def launch_text(doc: Mapping[str, object]) -> list[str]:
    """The ``--launch`` text: a heading, then per process where it runs and its line (from :func:`as_launch_dict`)."""
    text = [f"VM {doc['vm']}: {doc['framework']}, one process per guest NUMA node"]
    for n in doc["nodes"]:  # type: ignore[attr-defined]
        gpus = f"; GPUs {','.join(map(str, n['gpus']))} at {' '.join(n['gpu_addresses'])}" if n["gpus"] else ""
        nics = f"; NICs {' '.join(n['nics'])}" if n["nics"] else ""
        where = "no node" if n["node"] is None else f"node {n['node']}"
        text += [f"{where} (vCPUs {format_cpuset(n['cpus']) or '-'}{gpus}{nics}):", f"  {n['line']}"]
    return text


def env_file(view: GuestView, lines: tuple[LaunchNode, ...]) -> str:
    """``/etc/profile.d/vnuma.sh``: the environment the launch lines share, exported; a single process's whole
    environment; with several, each one's line as a comment (their ``CUDA_VISIBLE_DEVICES`` differ)."""
    env = dict(lines[0].env) if len(lines) == 1 else common_env(view)
    out = [f"# vnuma: the guest of VM {shlex.quote(view.vm)} (vnuma vm guest-view --launch)"]
    out += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    if len(lines) > 1:
        out.append("# one process per guest NUMA node:")
        out += [f"#   node {n.node}: {n.line()}" for n in lines]
    return "\n".join(out) + "\n"


def cloud_init(view: GuestView, lines: tuple[LaunchNode, ...], nccl_topology: str | None) -> str:
    """A cloud-init ``#cloud-config`` user-data document whose ``write_files`` writes ``nccl_topology`` to
    :data:`NCCL_TOPO_PATH` (left out when None: a VM without GPUs) and :func:`env_file` to :data:`ENV_PATH`."""
    files = ([(NCCL_TOPO_PATH, nccl_topology)] if nccl_topology is not None else []) + [
        (ENV_PATH, env_file(view, lines))]
    out = ["#cloud-config", "write_files:"]
    for path, content in files:
        out += [f"  - path: {path}", "    owner: root:root", "    permissions: '0644'", "    content: |"]
        out += [f"      {line}" if line else "" for line in content.rstrip("\n").split("\n")]
    return "\n".join(out) + "\n"
