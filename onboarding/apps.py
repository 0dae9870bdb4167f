from django.apps import AppConfig


class OnboardingConfig(AppConfig):
    name = "onboarding"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs.registry import register
        from onboarding.services import SIGNIN_HANDLER
        from onboarding.signins import SIGNIN_JOB

        register(SIGNIN_JOB, SIGNIN_HANDLER)
