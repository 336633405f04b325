"""LangChain's standard integration suite for the in-process llama.cpp chat model (real model)."""

from langchain_tests.integration_tests import ChatModelIntegrationTests

from integrations_tests.integration.conftest import FAST_LLM
from integrations_tests.standard_suite import LlamaCppSuiteMixin
from multihop_rag.backends import chat_model


class TestLlamaCppChatModelIntegration(LlamaCppSuiteMixin, ChatModelIntegrationTests):
    @property
    def chat_model_params(self) -> dict:
        return {"model_path": chat_model(FAST_LLM).model_path, "max_tokens": 64}

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_image_inputs(self) -> bool:
        return False
