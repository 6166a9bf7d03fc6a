"""tir_passes.infra: Pipeline infrastructure: loading programs, dumps and diffs, pass helpers."""
