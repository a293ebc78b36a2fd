"""What the peers' skins share: `tallyboard.wandb`, `tallyboard.tensorboard` and `tallyboard.mlflow`
are each one module at the top (the names their users import), standing on these.

`launch` finds the table and starts a run the peers' way (a new run per launch); `not_stored`
counts the calls a skin accepts but the store cannot hold, with one warning each; `images` turns
arrays in a peer's layout into what `LogWriter.add_image` takes; `names` makes a peer's nested dicts
table names; `wandb_run` and `wandb_data` are the W&B run and its data types. The skins use the
core and nothing of `integrations/`, `dashboard/` or `cli/` (tests/test_layering.py).
"""

from tallyboard.skins.not_stored import NotStoredWarning

__all__ = ["NotStoredWarning"]
