"""`ledger ui`: the ledger in a browser, live, on this machine (docs/ui.md).

A layer of its own above the commands: its pages call several commands' library functions
(`list_runs`, `show_run`, `compare_runs`, `diff_runs`, `tail_run`), which no command may do for
another. Bottom to top: `address` (where it listens, who may ask), `query` (the table's filter,
`ledger list`'s grammar), `state` (the ledger's version, pages kept by it), `layout`, `table`,
`runview` + `runpage`, `views` (each address's answer, no framework), `web` (Starlette: routes,
the read-only guard, the security headers), `serve` (uvicorn: the socket, the browser).
"""
