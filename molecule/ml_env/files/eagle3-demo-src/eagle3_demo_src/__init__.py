"""A source checkout for the ml_env scenario, installed with pip install -e."""
WHERE = "checkout"
