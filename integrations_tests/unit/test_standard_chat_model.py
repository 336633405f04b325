"""LangChain's standard unit suite for the in-process llama.cpp chat model."""

from langchain_tests.unit_tests import ChatModelUnitTests

from integrations_tests.standard_suite import LlamaCppSuiteMixin


class TestLlamaCppChatModelUnit(LlamaCppSuiteMixin, ChatModelUnitTests):
    @property
    def chat_model_params(self) -> dict:
        return {"model_path": "/nonexistent/model.gguf", "temperature": 0.0}
