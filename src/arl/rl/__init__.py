"""The seam every RL chapter stands on; a chapter's loop in `arl/recipes/` calls these in plain sight.

- `task`: what a chapter trains on (`Task`: items, start weights, held-out evaluation, rows to log);
  `MathTask` for single-turn problems, `EnvTask` for episodes against an environment.
- `session`: `open_session` (threads, client, resume or cold start, step-0 evaluation), `Session.end_step`, `finish`.
- `batch`: the prompt stream, group sampling and seeds, the rollouts with signal, the step metrics.
- `update`: the update of a step: `Objective`, `minibatches` (datum advantages, the loss), `StepStats`, `same_update`.
- `config`: the config field groups a chapter's `Config` composes (`defaults`, `objective`).
- `stages`: a run of several stages scored on several domains (`eval/stages.json`).
- `games`: generated TextWorld games as an `EnvTask` (TextWorld, TEMPO, AgentOPSD).
- `tempo`: TEMPO's macro-states, state store, critic prompt and value parsing, critic cold start and check.

It imports the layers below it and never a recipe.
"""
