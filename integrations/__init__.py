"""Mimir's host adapters (installed as ``mimir_integrations``): the CLI, hooks, MCP server and
framework integrations. Each adapter imports only its own host framework."""
