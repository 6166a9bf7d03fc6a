"""tir_passes.passes: S-TIR -> S-TIR passes, one per file (the pipeline's stages)."""
