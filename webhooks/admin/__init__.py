from webhooks.admin import endpoints, messages

__all__ = ["endpoints", "messages"]
