"""Launch lines per guest node (``vm guest-view --launch``) and the cloud-init document (``--cloud-init``): golden
files for every framework on the DGX-like host's 4-GPU VMs, agreement with the NCCL topology file, numactl
accepting the binding, and the document valid under cloud-init's own schema."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.render.nccl_reader import read_topology
from tests.render.test_golden import assert_golden
from tests.render.test_nccl_topo import BASE, GPUS, LINKED, NICS, SCENARIOS, _assignment, _dgx, _linked, _placed
from vnuma.errors import OptionsError
from vnuma.render.guestview import GuestNode, GuestView
from vnuma.render.launch import (
    ENV_PATH,
    FRAMEWORKS,
    NCCL_TOPO_PATH,
    as_launch_dict,
    cloud_init,
    launch_lines,
    launch_text,
)
from vnuma.render.nccltopo import nccl_topology
from vnuma.render.view import DomainView, RenderOptions, build_view
from vnuma.topology import Host

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "launch"
SCHEMA = Path(__file__).resolve().parent.parent / "data" / "cloud-init" / "schema-cloud-config-v1.json"


def _built(name: str) -> tuple[Host, DomainView, str]:
    host = _linked(_dgx("dgx"))
    placement = _placed(host, **SCENARIOS[name])
    built = build_view(host, placement, RenderOptions())
    return host, built, nccl_topology(host, placement, built)


def _golden_name(framework: str) -> str:
    return framework.replace(".", "")


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_launch_lines_match_their_golden_files(name: str, framework: str, update_golden: bool) -> None:
    _host, built, _topo = _built(name)
    doc = as_launch_dict(built.guest, framework, launch_lines(built.guest, framework))
    stem = GOLDEN / f"{name}-{_golden_name(framework)}"
    assert_golden(json.dumps(doc, indent=2) + "\n", stem.with_suffix(".json"), update_golden)
    assert_golden("\n".join(launch_text(doc)) + "\n", stem.with_suffix(".txt"), update_golden)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_node_runs_one_process_on_its_own_gpus_as_the_nccl_file_numbers_them(name: str, framework: str) -> None:
    _host, built, topo = _built(name)
    lines = launch_lines(built.guest, framework)
    system = read_topology(topo)
    by_node: dict[int, list[int]] = {}
    for cpu in system.iter("cpu"):
        by_node[int(cpu.attrs["numaid"])] = [int(g.attrs["dev"]) for g in cpu.iter("gpu")]
    assert [n.node for n in lines] == sorted(k for k, v in by_node.items() if v)  # one process per GPU node
    for n in lines:
        env = dict(n.env)
        assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["NCCL_TOPO_FILE"] == NCCL_TOPO_PATH
        assert env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, by_node[n.node]))  # type: ignore[index]
        words = shlex.split(n.command)
        assert words[:3] == ["numactl", f"--cpunodebind={n.node}", f"--membind={n.node}"]
        assert list(n.cpus) == list(built.guest.node(n.node).vcpus)  # type: ignore[arg-type]
        if framework in ("vllm", "sglang"):
            assert words[words.index("--tensor-parallel-size") + 1] == str(len(by_node[n.node]))  # type: ignore[index]
        if framework == "torchrun":
            assert f"--nnodes={len(lines)}" in words and "--local-ranks-filter=0" in words
            assert f"--nproc-per-node={len(n.gpus)}" in words
            assert (f"--node-rank={lines.index(n)}" in words) == (len(lines) > 1)
        if framework == "llama.cpp":
            assert words[words.index("--numa") + 1] == "numactl"


def test_the_two_node_vm_runs_one_process_per_node() -> None:
    _host, built, _topo = _built("dgx-4-gpus-two-nodes")
    lines = launch_lines(built.guest, "vllm")
    assert [n.node for n in lines] == [0, 1]
    assert [dict(n.env)["CUDA_VISIBLE_DEVICES"] for n in lines] == ["0,1", "2,3"]
    assert sorted(shlex.split(n.command)[-1] for n in lines) == ["8000", "8001"]  # two servers, two ports


def test_an_unknown_framework_is_a_usage_error() -> None:
    _host, built, _topo = _built("dgx-4-gpus-one-node")
    with pytest.raises(OptionsError, match=r"unknown framework 'tgi'.*vllm, sglang, llama\.cpp, torchrun") as err:
        launch_lines(built.guest, "tgi")
    assert err.value.exit_code == 2


CPU_ONLY = GuestView("cpu-only", "t", "h", (GuestNode(0, (0, 1), 1 << 20, 4, ()), GuestNode(1, (2, 3), 1 << 20, 4, ()),
                                            GuestNode(2, (), 4 << 20, 4, ())), ())


def test_a_vm_without_gpus_runs_the_cpu_backends_per_cpu_node_preferring_its_memory() -> None:
    lines = launch_lines(CPU_ONLY, "vllm")
    assert [n.node for n in lines] == [0, 1]  # not the memory-only node 2
    assert [dict(n.env) for n in lines] == [{"VLLM_CPU_OMP_THREADS_BIND": "0-1"}, {"VLLM_CPU_OMP_THREADS_BIND": "2-3"}]
    assert lines[1].command == "numactl --cpunodebind=1 --preferred=1 vllm serve MODEL --port 8001"
    assert "--device cpu" in launch_lines(CPU_ONLY, "sglang")[0].command
    assert "--n-gpu-layers" not in launch_lines(CPU_ONLY, "llama.cpp")[0].command


def test_names_are_shell_quoted() -> None:
    odd = GuestView("vm; rm -rf /", None, "h", (GuestNode(0, (0,), 1 << 20, 4, ()),), ())
    doc = cloud_init(odd, launch_lines(odd, "vllm"), None)
    env = yaml.safe_load(doc)["write_files"][0]["content"]
    assert env.splitlines()[0] == "# vnuma: the guest of VM 'vm; rm -rf /' (vnuma vm guest-view --launch)"
    assert env.splitlines()[1:] == ["export VLLM_CPU_OMP_THREADS_BIND=0"]


@pytest.mark.skipif(shutil.which("numactl") is None, reason="numactl is not installed here")
@pytest.mark.parametrize("memory", ["--membind=0", "--preferred=0"])
def test_numactl_accepts_the_binding_on_node_0(memory: str) -> None:
    """A real run of the printed binding on this machine's node 0, the command replaced by ``true``."""
    view = CPU_ONLY if memory.startswith("--preferred") else GuestView("v", None, "h", CPU_ONLY.nodes[:1], ())
    words = shlex.split(launch_lines(view, "llama.cpp")[0].command)
    binding = words[: words.index("llama-server")]
    assert binding == ["numactl", "--cpunodebind=0", memory]
    subprocess.run([*binding, "true"], check=True)


# --- cloud-init ---------------------------------------------------------------------------------------------------

IGNORED = {"description", "default", "format", "deprecated", "deprecated_version", "deprecated_description",
           "changed", "changed_version", "changed_description", "new", "new_version", "new_description", "$schema",
           "markdownDescription", "title", "$comment", "examples"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int, "null": type(None)}


def _errors(value: object, schema: dict, root: dict, where: str = "") -> list[str]:
    """The JSON-schema keywords the cloud-config schema uses on the way to ``write_files``, checked; a keyword not
    understood here fails (never a silent pass)."""
    unknown = set(schema) - IGNORED - {"$ref", "allOf", "anyOf", "oneOf", "type", "properties", "required",
                                       "additionalProperties", "items", "minItems", "enum", "$defs"}
    assert not unknown, f"{where}: schema keywords this check does not implement: {unknown}"
    found: list[str] = []
    if "$ref" in schema:
        target: dict = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        found += _errors(value, target, root, where)
    for sub in schema.get("allOf", []):
        found += _errors(value, sub, root, where)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            passing = sum(not _errors(value, sub, root, where) for sub in schema[key])
            if passing == 0 or (key == "oneOf" and passing > 1):
                found.append(f"{where}: {key} matched {passing}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(isinstance(value, TYPES[t]) and not (t == "integer" and isinstance(value, bool)) for t in types):
            found.append(f"{where}: not {types}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        found += [f"{where}: {k} required" for k in schema.get("required", []) if k not in value]
        for k, v in value.items():
            if k in props:
                found += _errors(v, props[k], root, f"{where}.{k}")
            elif schema.get("additionalProperties") is False:
                found.append(f"{where}: {k} not allowed")
            elif isinstance(schema.get("additionalProperties"), dict):
                found += _errors(v, schema["additionalProperties"], root, f"{where}.{k}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            found.append(f"{where}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                found += _errors(item, schema["items"], root, f"{where}[{i}]")
    return found


SCHEMA_DOC = json.loads(SCHEMA.read_text())


@pytest.mark.parametrize("framework", [None, "vllm"])
def test_the_cloud_init_document_is_valid_cloud_config(framework: str | None, tmp_path: Path) -> None:
    _host, built, topo = _built("dgx-4-gpus-two-nodes")
    text = cloud_init(built.guest, launch_lines(built.guest, framework), topo)
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert _errors(doc, SCHEMA_DOC, SCHEMA_DOC) == []
    files = {f["path"]: f["content"] for f in doc["write_files"]}
    assert list(files) == [NCCL_TOPO_PATH, ENV_PATH] and files[NCCL_TOPO_PATH] == topo
    env = tmp_path / "vnuma.sh"
    env.write_text(files[ENV_PATH])
    shown = subprocess.run(["sh", "-c", f'. "{env}"; echo "$CUDA_DEVICE_ORDER $NCCL_TOPO_FILE"'],
                           capture_output=True, text=True, check=True).stdout
    assert shown == f"PCI_BUS_ID {NCCL_TOPO_PATH}\n"


def test_the_schema_check_refuses_what_cloud_init_refuses() -> None:
    good = {"write_files": [{"path": "/a", "content": "x", "permissions": "0644"}]}
    assert _errors(good, SCHEMA_DOC, SCHEMA_DOC) == []
    for bad in ({"write_files": []}, {"write_files": [{"content": "x"}]}, {"write_files": [{"path": "/a", "mode": 1}]},
                {"write_files": [{"path": "/a", "encoding": "utf-9"}]}, {"write_filez": [{"path": "/a"}]}):
        assert _errors(bad, SCHEMA_DOC, SCHEMA_DOC), bad


def test_a_vm_without_gpus_gets_only_the_environment_file() -> None:
    doc = yaml.safe_load(cloud_init(CPU_ONLY, launch_lines(CPU_ONLY, None), None))
    assert _errors(doc, SCHEMA_DOC, SCHEMA_DOC) == []
    assert [f["path"] for f in doc["write_files"]] == [ENV_PATH]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(GPUS), min_size=1, max_size=6, unique=True),
       st.lists(st.sampled_from(NICS), max_size=6, unique=True), st.sampled_from(sorted(FRAMEWORKS)))
def test_the_processes_share_out_every_gpu_as_the_nccl_file_places_it(gpus: list[str], nics: list[str],
                                                                      framework: str) -> None:
    """Random device sets on the DGX-like host: each GPU is visible to exactly one process, the one on its node
    in the NCCL file, under the file's ``dev``; each NIC is listed by the process on its node."""
    placement = replace(BASE, devices=tuple(_assignment(a) for a in sorted(gpus + nics)))
    built = build_view(LINKED, placement, RenderOptions())
    system = read_topology(nccl_topology(LINKED, placement, built))
    by_node = {int(c.attrs["numaid"]): [int(g.attrs["dev"]) for g in c.iter("gpu")] for c in system.iter("cpu")}
    lines = launch_lines(built.guest, framework)
    assert {n.node: [int(i) for i in dict(n.env)["CUDA_VISIBLE_DEVICES"].split(",")] for n in lines} == {
        k: v for k, v in by_node.items() if v}
    nic_nodes = {d.guest_address: d.node for d in built.guest.devices if d.kind == "nic"}
    for n in lines:
        assert all(nic_nodes[d.guest_address] == n.node for d in n.nics)
