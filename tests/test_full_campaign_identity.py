"""A full campaign's protocol identity (issue 14, point 1): "the data's checksum is part of a full
campaign's protocol identity (simpler-full-visual-matching/..., simpler-full-variant-aggregation/...:
distinct from the prepackaged track, never pooled with it)"."""

import pytest

from evaluator.protocol.errors import InvalidCombination, MalformedIdentity, UnknownOption
from evaluator.protocol.full_matrix import full_configuration, load_matrix
from evaluator.protocol.identity import configure, parse_protocol_id


def test_a_full_campaign_is_named_by_its_matrix_and_the_datas_checksum():
    sha = load_matrix("visual_matching").sha256[:12]
    config = full_configuration("visual_matching")
    assert config.protocol_id == f"simpler-full-visual-matching/matrix-{sha}/rgb/v1"
    assert full_configuration("variant_aggregation", sensors="rgb-qpos").protocol_id == (
        f"simpler-full-variant-aggregation/matrix-{sha}/rgb-qpos/v1"
    )
    assert parse_protocol_id(config.protocol_id) == config
    assert config.as_dict()["full_protocol"] == "visual_matching" and config.as_dict()["matrix_sha"] == sha


def test_it_is_never_the_prepackaged_track_nor_another_matrix_data():
    full = configure("simpler_env", full_protocol="visual_matching", matrix_sha="0123456789ab")
    assert full.protocol_id != configure("simpler_env").protocol_id
    assert (
        full.protocol_id
        != configure("simpler_env", full_protocol="visual_matching", matrix_sha="ba9876543210").protocol_id
    )
    assert "full_protocol" not in configure("simpler_env").as_dict()  # older identities' records unchanged


def test_bad_full_matrix_options_are_refused():
    with pytest.raises(InvalidCombination, match="simpler_env only"):
        configure("fetch", full_protocol="visual_matching", matrix_sha="0123456789ab")
    with pytest.raises(UnknownOption, match="unknown full matrix"):
        configure("simpler_env", full_protocol="everything", matrix_sha="0123456789ab")
    with pytest.raises(MalformedIdentity, match="12 lowercase hex"):
        configure("simpler_env", full_protocol="visual_matching", matrix_sha="XYZ")
    with pytest.raises(MalformedIdentity):
        parse_protocol_id("simpler-full-visual-matching/matrix-0123/rgb/v1")
