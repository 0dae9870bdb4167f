"""Delivery channels: every byte that leaves the process goes through this package.

`email.send_email` and `webhook.send_webhook` never raise; they return a `base.DeliveryResult`
that says whether retrying can help. `http.post` is the one place that makes HTTP calls.
"""
