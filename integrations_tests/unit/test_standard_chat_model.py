"""LangChain's standard unit suite for the in-process llama.cpp chat model."""

from langchain_tests.unit_tests import ChatModelUnitTests

from multihop_rag.llamacpp import LlamaCppChatModel


class TestLlamaCppChatModelUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[LlamaCppChatModel]:
        return LlamaCppChatModel

    @property
    def chat_model_params(self) -> dict:
        return {"model_path": "/nonexistent/model.gguf", "temperature": 0.0}

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False
