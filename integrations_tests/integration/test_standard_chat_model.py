"""LangChain's standard integration suite for the in-process llama.cpp chat model (real model)."""

from langchain_tests.integration_tests import ChatModelIntegrationTests

from integrations_tests.integration.conftest import FAST_LLM
from multihop_rag.backends import chat_model
from multihop_rag.llamacpp import LlamaCppChatModel


class TestLlamaCppChatModelIntegration(ChatModelIntegrationTests):
    @property
    def chat_model_class(self) -> type[LlamaCppChatModel]:
        return LlamaCppChatModel

    @property
    def chat_model_params(self) -> dict:
        model = chat_model(FAST_LLM) if FAST_LLM.startswith("llamacpp:") else None
        return {"model_path": model.model_path if model else FAST_LLM, "max_tokens": 64}

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_image_inputs(self) -> bool:
        return False
