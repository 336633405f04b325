"""What LangChain's standard chat-model suites need to know about ``LlamaCppChatModel``."""

from multihop_rag.serving.llamacpp import LlamaCppChatModel


class LlamaCppSuiteMixin:
    """Shared by the unit and integration standard suites: the class and the features it lacks."""

    @property
    def chat_model_class(self) -> type[LlamaCppChatModel]:
        return LlamaCppChatModel

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False
