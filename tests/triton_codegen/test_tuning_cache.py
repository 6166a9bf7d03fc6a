"""Caches that prove what they load: a tuning entry carries the generated source's hash and the
tir-triton and Triton versions, and a cached choice that the module's search space does not allow
(a block of 128 for rows of 200 held in one tile, a block of 3) is refused, not written in; a file
of valid JSON but the wrong shape is a clear error; threads storing one entry do not collide."""

import json
import os
import threading

import pytest

from softmax import make_softmax
from tir_passes.errors import FrontendError
from triton_codegen import compile, tuning_cache
from triton_codegen.tuning import tune_module


@pytest.fixture()
def saved_softmax(tmp_path, monkeypatch):
    monkeypatch.setenv("TIR_TRITON_CACHE", str(tmp_path / "cache"))
    return compile(make_softmax(5, 200), verify=False).save(str(tmp_path / "deploy") + os.sep)


def _tune(path):
    return tune_module(path, {}, timer_factory=lambda module, args: (lambda assignment: 1.0), interpret=True,
                       gpu="H200", progress=False, write=False)


def _cache_file() -> str:
    [name] = os.listdir(os.environ["TIR_TRITON_CACHE"])
    return os.path.join(os.environ["TIR_TRITON_CACHE"], name)


def _poison(**config):
    path = _cache_file()
    entry = json.load(open(path))
    entry["result"]["chosen"]["softmax_kernel0"].update(config)
    json.dump(entry, open(path, "w"))


def test_the_key_holds_the_generated_source_and_the_versions(saved_softmax):
    key = _tune(saved_softmax)["cache_key"]
    assert key["tir_triton"] == "0.1.0" and key["triton"] and len(key["generated_source"]) == 16
    with open(saved_softmax, "a") as handle:   # another generated source: another key
        handle.write("\n# edited\n")
    assert _tune(saved_softmax)["cache_key"]["generated_source"] != key["generated_source"]


@pytest.mark.parametrize("block, why", [(128, "breaks what the kernel assumes"), (3, "not a power of two")])
def test_a_cached_choice_outside_the_search_space_is_refused(saved_softmax, block, why):
    _tune(saved_softmax)
    _poison(BLOCK_AX0=block)
    with pytest.warns(UserWarning, match="cached tuning choice is refused"):
        again = _tune(saved_softmax)
    assert not again["cache_hit"] and why in again["cache_refused"]
    assert again["chosen"]["softmax_kernel0"]["BLOCK_AX0"] == 256


@pytest.mark.parametrize("content", ["[1, 2]", '{"key": {}, "result": {"chosen": [1]}}', '{"key": 3}'])
def test_a_cache_file_of_the_wrong_shape_is_a_clear_error(saved_softmax, content):
    _tune(saved_softmax)
    with open(_cache_file(), "w") as handle:
        handle.write(content)
    with pytest.raises(FrontendError, match="tuning cache file .* not an entry"):
        _tune(saved_softmax)


def test_threads_storing_one_entry_do_not_collide(tmp_path, monkeypatch):
    monkeypatch.setenv("TIR_TRITON_CACHE", str(tmp_path))
    key, errors = {"format": tuning_cache.FORMAT, "x": 1}, []

    def store(index):
        try:
            for _ in range(20):
                tuning_cache.store("m", key, {"chosen": {"k": {"BLOCK": index}}})
        except Exception as err:  # noqa: BLE001 - collected for the assertion
            errors.append(err)

    threads = [threading.Thread(target=store, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and os.listdir(tmp_path) == [os.path.basename(tuning_cache.cache_path("m", key))]
    assert tuning_cache.load("m", key)["chosen"]["k"]["BLOCK"] in range(8)
