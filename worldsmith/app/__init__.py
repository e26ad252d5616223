"""Application services shared by the CLI, the router, the web UI and the LangGraph server."""
