"""SavedModel export for serving, and a Python client for exports."""
