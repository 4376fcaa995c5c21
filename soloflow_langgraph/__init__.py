"""SoloFlow's LangChain / LangGraph adapters."""
