from django.db import migrations, models


def name_the_interveners(apps, schema_editor):
    """Interventions recorded before the name was kept take the user's present name: the best that is known."""
    Intervention = apps.get_model("evaluator", "Intervention")
    for intervention in Intervention.objects.select_related("user").filter(username=""):
        Intervention.objects.filter(pk=intervention.pk).update(username=intervention.user.username)


class Migration(migrations.Migration):
    dependencies = [
        ("evaluator", "0011_interrupted_error"),
    ]

    operations = [
        migrations.AddField(
            model_name="intervention",
            name="username",
            field=models.CharField(
                default="",
                editable=False,
                help_text="Who intervened, as named then: a later rename changes nothing.",
                max_length=150,
            ),
            preserve_default=False,
        ),
        migrations.RunPython(name_the_interveners, migrations.RunPython.noop),
    ]
