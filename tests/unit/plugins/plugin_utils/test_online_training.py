# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The producer's in-flight window: as many samples of the longest prompt as the segment's share holds."""

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.eagle3.extraction.plugins.filter.online_training_window import online_training_window
from ansible_collections.eagle3.extraction.plugins.plugin_utils.online_training import (
    WindowError, hidden_size, token_bytes, watermarks)

GIB = 1 << 30


def online(segment_bytes=4 * GIB, aux=(1, 29, 57)):
    return {'master': {'segment_bytes': segment_bytes}, 'aux_layer_ids': list(aux) if aux is not None else None}


def settings(**changes):
    found = {'target_model_path': '/srv/models/t', 'segment_share': 0.5, 'max_length': 2048, 'consumer': 'reader',
             'batch_size': 1, 'gpus': []}
    found.update(changes)
    return found


def test_a_token_holds_the_capture_layers_the_last_hidden_state_and_the_passthrough():
    # Kimi K2's 7168 wide, three capture layers: 4 states of 2 bytes, and three int64
    assert token_bytes(7168, 3) == 7168 * 4 * 2 + 24


def test_the_high_watermark_is_the_samples_the_share_of_the_segment_holds():
    found = watermarks(4 * GIB, 0.5, 2048, 7168, [1, 29, 57])
    sample = 2048 * (7168 * 4 * 2 + 24)
    assert found['sample_bytes'] == sample
    assert found['high'] == (2 * GIB) // sample == 18
    assert found['low'] == 13   # three quarters, rounded down


def test_no_layers_given_counts_the_captures_three_default_layers():
    assert watermarks(GIB, 1.0, 100, 64, None) == watermarks(GIB, 1.0, 100, 64, [2, 30, 58])
    assert watermarks(GIB, 1.0, 100, 64, [1])['high'] > watermarks(GIB, 1.0, 100, 64, None)['high']


def test_one_sample_that_fits_gives_a_window_of_one():
    sample = 100 * token_bytes(64, 3)
    found = watermarks(sample, 1.0, 100, 64, None)
    assert (found['high'], found['low']) == (1, 1)


def test_both_watermarks_hold_the_consumers_optimizer_step():
    found = watermarks(4 * GIB, 0.5, 2048, 7168, None, quantum=16)
    assert found['high'] == 18 and found['low'] == 16


def test_a_segment_that_cannot_hold_one_sample_of_max_length_is_refused_naming_the_variables():
    sample = 2048 * token_bytes(7168, 3)
    with pytest.raises(WindowError) as caught:
        watermarks(sample, 0.5, 2048, 7168, None)
    message = str(caught.value)
    for words in ('online_training_segment_share=0.5', 'mooncake_master_segment_bytes=%d' % sample,
                  'online_training_max_length=2048', 'cannot hold'):
        assert words in message


def test_a_segment_that_cannot_hold_one_optimizer_step_is_refused():
    with pytest.raises(WindowError, match='one optimizer step'):
        watermarks(10 * 100 * token_bytes(64, 3), 1.0, 100, 64, None, quantum=11)


@pytest.mark.parametrize('share', [0, -0.1, 1.5, float('nan'), True, '0.5'])
def test_a_share_out_of_range_is_refused(share):
    with pytest.raises(WindowError, match='online_training_segment_share'):
        watermarks(GIB, share, 100, 64, None)


def test_the_hidden_size_is_the_configs_or_its_text_configs():
    assert hidden_size({'hidden_size': 64}) == 64
    assert hidden_size({'text_config': {'hidden_size': 7168}}) == 7168
    with pytest.raises(WindowError, match='/m/config.json has no positive integer hidden_size'):
        hidden_size({'hidden_size': '64'}, '/m')


def test_the_filter_uses_the_plans_segment_and_layers_and_the_consumers_quantum():
    found = online_training_window({'hidden_size': 7168}, online(), settings())
    assert (found['high'], found['low'], found['hidden_size'], found['aux_layers']) == (18, 13, 7168, 3)
    trainer = online_training_window({'hidden_size': 7168}, online(),
                                     settings(consumer='specforge', batch_size=4, gpus=['0', '1']))
    assert trainer['low'] == 13 and trainer['high'] == 18
    with pytest.raises(AnsibleFilterError, match='optimizer step'):
        online_training_window({'hidden_size': 7168}, online(), settings(consumer='specforge', batch_size=32,
                                                                         gpus=['0', '1']))


def test_a_host_without_an_online_plan_is_refused():
    with pytest.raises(AnsibleFilterError, match='no online section'):
        online_training_window({'hidden_size': 64}, None, settings())
