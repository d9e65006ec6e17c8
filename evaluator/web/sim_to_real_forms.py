"""The sim-to-real page's forms: one real-robot rate, a CSV file of them, and which policies the metrics cover."""

from __future__ import annotations

import csv
import io

from django import forms

from evaluator.protocol.sim_to_real import tasks
from evaluator.records.models import Policy


class RealRateForm(forms.Form):
    """A real-robot success rate of an evaluated policy on one sim-to-real task."""

    policy = forms.ModelChoiceField(queryset=Policy.objects.order_by("name"), to_field_name="name")
    task = forms.ChoiceField()
    rate = forms.FloatField(min_value=0, max_value=1, help_text="Success rate on the real robot, in [0, 1].")
    trials = forms.IntegerField(min_value=1, max_value=100_000, required=False, help_text="Real episodes, if known.")
    source = forms.CharField(max_length=500, help_text="Where the number comes from (a paper, a lab log).")

    def __init__(self, *args, known_policies: dict[str, Policy] | None = None, **kwargs):
        """known_policies: the policies by name, looked up once for a whole file (a row then asks no query)."""
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [(t, t) for t in tasks()]
        self.known_policies = known_policies
        if known_policies is not None:
            self.fields["policy"] = forms.CharField(max_length=200)

    def clean_policy(self):
        value = self.cleaned_data["policy"]
        if self.known_policies is None:
            return value
        if value not in self.known_policies:
            raise forms.ValidationError(f"no policy {value[:100]!r}")
        return self.known_policies[value]


class SimToRealSelectionForm(forms.Form):
    """Which policies the sim-to-real metrics are computed over (a query string: ?policy=a&policy=b);
    none chosen means all of them."""

    policy = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args, policies: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["policy"].choices = policies
        self.fields["policy"].initial = [name for name, _ in policies]


RATE_COLUMNS = ["policy", "task", "rate", "trials", "source"]
MAX_UPLOAD_BYTES = 1_000_000
MAX_RATE_ROWS = 1_000  # far more than policies x the 9 sim-to-real tasks a lab reports at once


class RealRatesUploadForm(forms.Form):
    """Several real-robot rates at once: a CSV file with the header policy,task,rate,trials,source. Every row
    is checked as the one-rate form checks it; one bad row refuses the whole file, naming each bad row."""

    file = forms.FileField(
        help_text=f"CSV: policy,task,rate,trials,source (trials may be empty); at most 1 MB and {MAX_RATE_ROWS} rates."
    )

    def clean_file(self) -> list[dict]:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"the file has {upload.size} bytes; at most {MAX_UPLOAD_BYTES}")
        try:
            text = upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError("the file is not UTF-8 text") from None
        reader = csv.DictReader(io.StringIO(text))
        read, number = [], 0  # the last line read whole; line 1 is the header
        try:
            header, number = reader.fieldnames, 1
            if header != RATE_COLUMNS:
                got = str(header)[:200]
                raise forms.ValidationError(f"the header must be {','.join(RATE_COLUMNS)}, got {got}")
            for number, row in enumerate(reader, start=2):
                if len(read) == MAX_RATE_ROWS:
                    raise forms.ValidationError(f"the file holds more than {MAX_RATE_ROWS} rates: send at most that")
                read.append((number, row))
        except csv.Error as exc:  # a field over the csv module's size limit (131,072 characters)
            raise forms.ValidationError(f"line {number + 1}: not CSV that can be read ({exc})") from None
        names = {row["policy"] for _, row in read if isinstance(row.get("policy"), str)}
        known = {policy.name: policy for policy in Policy.objects.filter(name__in=names)}  # one query
        rows, errors = [], []
        for number, row in read:
            form = RealRateForm(row, known_policies=known)
            if form.is_valid():
                rows.append(form.cleaned_data)
            else:
                errors += [f"line {number}: {field}: {' '.join(e)}" for field, e in form.errors.items()]
        if errors:
            raise forms.ValidationError(errors[:50])
        if not rows:
            raise forms.ValidationError("the file has no rates")
        return rows
