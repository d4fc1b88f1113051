"""Latency-regression alerts: rules, their evaluation, and notification channels."""
