"""Application services: one orchestration per flow, shared by the CLI, the router's actions, the web UI and the
LangGraph server. Above graphs/agents/training/tools/llm/core; below commands/, ui/ and cli."""
