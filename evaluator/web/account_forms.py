"""The account page's form: a personal API token's name and lifetime."""

from django import forms


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'training cluster CI'.")
    expires_in_days = forms.IntegerField(
        label="expires after (days)",
        required=False,
        min_value=1,
        max_value=366,
        help_text="Empty: never; revoke it when it is no longer needed.",
    )
