"""Graph-to-graph passes: each rewrites a whole Module in place.

In the order `tfl2tosa.pipeline.convert` runs them around the legalization:

- `inline_calls`: CALL and STABLEHLO_COMPOSITE replaced by a copy of the graph
  each runs;
- `resource_variables`: VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE and the
  session-initialization graph -> TOSA variables;
- (legalization: `legalize.legalize`, TFL ops -> TOSA ops and quant casts)
- `simplify`: `cse` and `dce` merge what the patterns built twice;
- `lower_quant`: `quant.qcast` / `quant.dcast` -> TOSA arithmetic and `quant.scast`;
- `strip_quant_types`: storage integer types at graph boundaries and on TOSA ops;
- `simplify`: `canonicalize` (folds the scast pairs), `cse`, `dce`.

The package imports nothing itself: a pass's module is imported when used.
"""
