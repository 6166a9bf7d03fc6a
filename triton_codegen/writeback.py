"""Write a tuning choice into a saved module and its manifest, so deployment needs no tuning.

A module's run() launches each kernel with `CONFIGS[name][CHOSEN[name]]`. Writing back adds the
chosen config to the kernel's list when it is not there and points CHOSEN at it; the two literals
are replaced in place (located with `ast`, formatted as emit_module formats them), every other
byte of the module stays. `manifest.json` beside the module gets the same lists, each kernel's
`chosen` index and a `tuning` record (GPU, timings, noise, cache key), in the module's entry.

A folder has one `manifest.json` listing every module in it: `{"modules": {"<file>.py": entry}}`,
keys sorted. Writing an entry merges it into the file under a lock, and the file is replaced
atomically, so a second function compiled into the same folder (or a tuner writing back while
another compiles) never loses an entry. A manifest of the old form (one module's entry at the
top level) is read as that one module.

Imports only the standard library: it runs on a GPU machine without TVM.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import pprint

from tir_passes.errors import FrontendError


def configs_source(configs: dict[str, list[dict]], chosen: dict[str, int]) -> str:
    """The CONFIGS and CHOSEN lines of a generated module."""
    return ("CONFIGS = " + pprint.pformat(configs, width=100, sort_dicts=False) + "\n" +
            "CHOSEN = " + repr(chosen) + "\n")


def write_back(module_path: str, chosen: dict[str, dict], tuning: dict) -> dict[str, int]:
    """Make `chosen` (kernel -> config) the module's configs; returns the CHOSEN indices written."""
    with open(module_path) as handle:
        source = handle.read()
    spans = _literal_spans(source, module_path)
    configs = ast.literal_eval(_span_text(source, spans["CONFIGS"]).split("=", 1)[1])
    indices = ast.literal_eval(_span_text(source, spans["CHOSEN"]).split("=", 1)[1])
    for name, config in chosen.items():
        if name not in configs:
            raise FrontendError(f"{module_path}: the tuning result names kernel {name}, which the module does not have")
        if config not in configs[name]:
            configs[name].append(config)
        indices[name] = configs[name].index(config)
    lines = source.splitlines(keepends=True)
    first, last = spans["CONFIGS"][0], spans["CHOSEN"][1]
    if spans["CHOSEN"][0] != spans["CONFIGS"][1]:
        raise FrontendError(f"{module_path}: CHOSEN does not follow CONFIGS; was the module edited by hand?")
    _write_atomically(module_path, "".join(lines[:first]) + configs_source(configs, indices) + "".join(lines[last:]))
    manifest = os.path.join(os.path.dirname(os.path.abspath(module_path)), "manifest.json")
    if os.path.exists(manifest):
        _update_manifest(manifest, configs, indices, tuning, os.path.basename(module_path))
    return indices


def _literal_spans(source: str, path: str) -> dict[str, tuple[int, int]]:
    """0-based [first, last) line ranges of the top-level CONFIGS and CHOSEN assignments."""
    spans = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("CONFIGS", "CHOSEN"):
                spans[node.targets[0].id] = (node.lineno - 1, node.end_lineno)
    missing = [name for name in ("CONFIGS", "CHOSEN") if name not in spans]
    if missing:
        raise FrontendError(f"{path}: not a tir-triton module (no {' or '.join(missing)})")
    return spans


def _span_text(source: str, span: tuple[int, int]) -> str:
    return "".join(source.splitlines(keepends=True)[span[0]:span[1]])


def _update_manifest(path: str, configs: dict[str, list[dict]], indices: dict[str, int], tuning: dict,
                     module_file: str) -> None:
    with _locked(path):
        modules = read_manifest(path)
        entry = modules.get(module_file)
        if entry is None:
            return
        for kernel in entry.get("kernels", []):
            if kernel.get("name") in configs:
                kernel["configs"] = configs[kernel["name"]]
                kernel["chosen"] = indices[kernel["name"]]
        entry["tuning"] = tuning
        _write_manifest(path, modules)


def read_manifest(path: str) -> dict[str, dict]:
    """The modules a folder's manifest lists, by file name ({} when there is none yet)."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as err:
        raise FrontendError(f"{path}: not a tir-triton manifest ({err})") from None
    if isinstance(manifest, dict) and isinstance(manifest.get("modules"), dict):
        return manifest["modules"]
    if isinstance(manifest, dict) and "name" in manifest:  # the old form: one module's entry
        return {f"{manifest['name']}.py": manifest}
    raise FrontendError(f"{path}: not a tir-triton manifest (no \"modules\")")


def add_to_manifest(path: str, module_file: str, entry: dict) -> str:
    """Put `entry` into the folder's manifest as `module_file`'s, keeping every other module's."""
    with _locked(path):
        modules = read_manifest(path)
        modules[module_file] = entry
        _write_manifest(path, modules)
    return path


def _write_manifest(path: str, modules: dict[str, dict]) -> None:
    _write_atomically(path, json.dumps({"modules": modules}, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def _locked(path: str):
    """Hold an exclusive lock on the manifest's folder while reading, merging and replacing the
    manifest (the folder, not a lock file: a deployed folder holds only modules and the manifest)."""
    try:
        import fcntl
    except ImportError:  # no advisory locks on this platform: the atomic replace still holds
        yield
        return
    folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)  # releases the lock


def _write_atomically(path: str, text: str) -> None:
    """Readers (an importing process, another tuner) see the old file or the new, never half."""
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w") as handle:
        handle.write(text)
    os.replace(temporary, path)
