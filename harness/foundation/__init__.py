"""The foundation every layer of the harness may use: instances and tokens (`data`,
`tokenization`), run folders (`runs`, `outputs`), model files and their placement (`models`,
`dispatch`), option parsing (`options`, `caps`, `supervision_options`), threads and
statistics. Nothing here imports a layer above it."""
