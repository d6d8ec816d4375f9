"""Feature hashing, the same function as data/feature_hash.h.

The uint64 keys of a sparse model: a categorical value, a text token or a
numeric bucket "b<i>" of a field, hashed so that Python and the C++ readers
give the same example the same keys. Checked against the shared vectors in
data/testdata/feature_hash_vectors.tsv (tests/python_client_test.py, and
data/feature_hash_test.cc on the C++ side).

    feature_key("color", "red")   # == hash_bytes(b"color\\x1fred")
    field_key("loan_amnt")        # == hash_bytes(b"loan_amnt")
    mix_key(k) % buckets          # the ps's bucket of key k

Strings are encoded as UTF-8; bytes are hashed as given (no lower-casing,
trimming or normalization, as in C++).
"""

_MASK = (1 << 64) - 1
_FNV_OFFSET_BASIS = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
FIELD_SEPARATOR = b"\x1f"


def _bytes(s):
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)


def _fnv_update(h, data):
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & _MASK
    return h


def fnv1a64(data):
    """64-bit FNV-1a of the bytes (Fnv1a64)."""
    return _fnv_update(_FNV_OFFSET_BASIS, _bytes(data))


def fmix64(k):
    """MurmurHash3's 64-bit finalizer (Fmix64)."""
    k &= _MASK
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK
    k ^= k >> 33
    return k


def hash_bytes(data):
    """fmix64(fnv1a64(data)) (HashBytes)."""
    return fmix64(fnv1a64(data))


def feature_key_prefix(field):
    """The FNV-1a state after field + '\\x1f' (FeatureKeyPrefix)."""
    return _fnv_update(_FNV_OFFSET_BASIS, _bytes(field) + FIELD_SEPARATOR)


def feature_key_from(prefix, value):
    """feature_key in two steps (FeatureKeyFrom)."""
    return fmix64(_fnv_update(prefix, _bytes(value)))


def feature_key(field, value):
    """The key of `value` of `field`: hash_bytes(field + '\\x1f' + value)."""
    return feature_key_from(feature_key_prefix(field), value)


def field_key(field):
    """The key of a numeric field used as a value: hash_bytes(field)."""
    return hash_bytes(field)


def mix_key(key):
    """SplitMix64's finalizer, applied before `% buckets` (MixKey)."""
    z = key & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def bucket_of(key, buckets):
    """The hash bucket of `key` among `buckets` (common/sparse_keys.h)."""
    return mix_key(key) % buckets


def _is_token_byte(c):
    return 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A or 0x30 <= c <= 0x39


def tokenize(text):
    """Runs of [a-z0-9] after ASCII lower-casing, as bytes (Tokenize)."""
    tokens, token = [], bytearray()
    for c in _bytes(text):
        if _is_token_byte(c):
            token.append(c + 32 if 0x41 <= c <= 0x5A else c)
        elif token:
            tokens.append(bytes(token))
            token = bytearray()
    if token:
        tokens.append(bytes(token))
    return tokens


def token_keys(field, text):
    """feature_key(field, t) for each token t of `text` (AppendTokenKeys)."""
    prefix = feature_key_prefix(field)
    return [feature_key_from(prefix, t) for t in tokenize(text)]
