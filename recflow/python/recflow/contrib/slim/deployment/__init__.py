"""TF-slim's deployment: model_deploy (model clones on one machine, variables on ps
tasks)."""
