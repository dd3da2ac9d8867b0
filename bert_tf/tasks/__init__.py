"""Each task's data, features and metrics; the scripts hold the models."""
