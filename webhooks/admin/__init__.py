from webhooks.admin import endpoints, messages, portal

__all__ = ["endpoints", "messages", "portal"]
