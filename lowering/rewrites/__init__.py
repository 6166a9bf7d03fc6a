"""lowering.rewrites: TileProgram -> TileProgram rewrites that run after the walk (hoisted loads, parameter reads, tile accesses)."""  # noqa: E501
