"""tir_passes.analyses: Questions about S-TIR that passes, checks and the lowering ask; no rewrites, no decisions stored."""  # noqa: E501
