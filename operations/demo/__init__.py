"""`manage.py demo` and what it runs beside the product: the example front end, a webhook
receiver, a Turnstile stand-in, the process supervisor, and the demo tenant's setup."""
