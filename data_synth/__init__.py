"""ToolScale synthesis: tool-use domains and verified tasks, written as τ² domain directories.

domain description -> database and tool spec -> intents (tool subsets) -> tasks (tool chains) ->
evolve -> verify -> `DIR/<domain>/` (db.json, policy.md, tasks.json, split_tasks.json, tools.json)
plus a ToolScale-style JSONL and a stats table. Offline (seeded fake data) or with an LLM.
Run it with `toolorch synth`; `pipeline.synthesize` is the library entry point.
"""
