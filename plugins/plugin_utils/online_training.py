# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The producer's in-flight window, from the Mooncake segment that holds the samples in flight.

SpecForge 0.2.0's producer pauses leasing prompts when ``runtime.in_flight_high_watermark`` refs (samples) are
published and not yet consumed, and resumes under ``in_flight_low_watermark``. Each of those samples holds its
features in the master host's segment until the consumer releases it, so the window is the share of the segment
the run may fill (``online_training_segment_share``) over the largest sample: ``online_training_max_length``
tokens of the capture layers concatenated and the last hidden state (bfloat16, 2 bytes a value) and the
passthrough's three int64 values a token (input_ids, loss_mask, position ids).

SpecForge refuses a low watermark below the consumer's optimizer-step quantum (the samples one step takes:
``batch_size`` times the trainer's processes), so both watermarks are at least that; a segment whose share cannot
hold that many samples of the longest prompt is refused here, naming the variables, before anything starts.
"""

from __future__ import annotations

import math

BYTES_PER_VALUE = 2            # bfloat16 hidden states
PASSTHROUGH_BYTES = 3 * 8      # three int64 values a token
DEFAULT_AUX_LAYERS = 3         # the capture's default layers, when the servers give none


class WindowError(ValueError):
    """A window that cannot work, in words naming the variables and their values."""


def hidden_size(config, path=''):
    """The target's hidden size from its parsed config.json (a multimodal model's ``text_config``'s)."""
    if isinstance(config, dict):
        for found in (config.get('hidden_size'), (config.get('text_config') or {}).get('hidden_size')):
            if isinstance(found, int) and not isinstance(found, bool) and found > 0:
                return found
    raise WindowError('online_training_target_model_path: %s has no positive integer hidden_size (nor '
                      'text_config.hidden_size)' % ('%s/config.json' % path if path else 'config.json'))


def token_bytes(hidden, aux_layers):
    """The bytes one token of a sample takes in the store."""
    return hidden * (aux_layers + 1) * BYTES_PER_VALUE + PASSTHROUGH_BYTES


def watermarks(segment_bytes, share, max_length, hidden, aux_layer_ids=None, quantum=1):
    """{high, low, sample_bytes, window_bytes}: the producer's watermarks (samples) and what they rest on.

    ``aux_layer_ids``: the plan's ``online.aux_layer_ids`` (None: the capture's default, three layers);
    ``quantum``: the samples one optimizer step of the consumer takes.
    """
    for name, value, low in (('online.master.segment_bytes', segment_bytes, 1), ('online_training_max_length',
                             max_length, 1), ('hidden_size', hidden, 1), ('quantum', quantum, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise WindowError('%s=%r: expected a whole number of at least %d' % (name, value, low))
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not math.isfinite(share) \
            or not 0 < share <= 1:
        raise WindowError('online_training_segment_share=%r: expected a number above 0 and at most 1' % (share,))
    aux_layers = len(aux_layer_ids) if aux_layer_ids else DEFAULT_AUX_LAYERS
    sample = max_length * token_bytes(hidden, aux_layers)
    window = int(segment_bytes * share)
    high = window // sample
    if high < quantum:
        raise WindowError(
            'the Mooncake segment cannot hold the in-flight window of the longest prompt: '
            'online_training_segment_share=%s of the master\'s segment (mooncake_master_segment_bytes=%d) is %d '
            'bytes, and one sample of online_training_max_length=%d tokens takes %d bytes (hidden size %d, %d '
            'capture layers and the last hidden state, bfloat16, and the passthrough\'s %d bytes a token); %d such '
            'samples (one optimizer step) need %d bytes. Give a larger mooncake_master_segment_bytes or '
            'online_training_segment_share, or a smaller online_training_max_length'
            % (share, segment_bytes, window, max_length, sample, hidden, aux_layers, PASSTHROUGH_BYTES, quantum,
               quantum * sample))
    high = max(high, 1)
    low = min(high, max(high * 3 // 4, quantum))
    return {'high': high, 'low': low, 'sample_bytes': sample, 'window_bytes': window}


def quantum(consumer, batch_size, gpus):
    """The samples one optimizer step of the consumer takes: the reader takes one at a time; SpecForge's trainer
    ``batch_size`` on each of its processes (one a GPU)."""
    return 1 if consumer == 'reader' else int(batch_size) * max(1, len(gpus or ()))


def window(config, online, settings):
    """The role's window from the target's parsed config.json, the plan's ``online`` section and the role's
    settings (target_model_path, segment_share, max_length, consumer, batch_size, gpus): watermarks()'s dict
    with the hidden size and the capture layers it counted."""
    if not isinstance(online, dict) or not isinstance(online.get('master'), dict):
        raise WindowError('this host trains no online job: the host plan has no online section (online_training_job '
                          'names a job whose servers run extraction_job_mode=online?)')
    hidden = hidden_size(config, settings.get('target_model_path', ''))
    found = watermarks(int(online['master']['segment_bytes']), float(settings['segment_share']),
                       int(settings['max_length']), hidden, online.get('aux_layer_ids'),
                       quantum(settings['consumer'], settings['batch_size'], settings['gpus']))
    found.update(hidden_size=hidden,
                 aux_layers=len(online['aux_layer_ids']) if online.get('aux_layer_ids') else DEFAULT_AUX_LAYERS)
    return found
