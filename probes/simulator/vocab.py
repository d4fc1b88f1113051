"""The simulator's tokens: common words that are each exactly one o200k_base token.

Concatenated, they tokenise back to one token per word, so the simulator's reported
usage, its event schedule and our own o200k count agree exactly (a test checks it).
"""

_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there had been one all we their has would "
    "when if so what no more out can time up only its other some into new then could them "
    "these two may first any like now my such over our even most made after also did many "
    "before must through back years where much your way well down should because each just "
    "those people how too little state good very make world still own see men work long "
    "here get both between life being under never day same another know while last might "
    "us great old year off come since against go came right used take three"
)
WORDS = tuple(" " + w for w in _TEXT.split())


def token(i: int) -> str:
    return WORDS[(i * 7 + 3) % len(WORDS)]  # a fixed, non-repeating-looking walk


def text(start: int, count: int) -> str:
    return "".join(token(i) for i in range(start, start + count))
