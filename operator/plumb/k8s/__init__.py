"""Thin async Kubernetes API access and the API's own value formats; no scheduling logic here."""
