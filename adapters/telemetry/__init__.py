"""Traces and metrics through OpenTelemetry's API; the application configures the SDK."""
