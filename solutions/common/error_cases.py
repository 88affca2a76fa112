"""Error cases: arguments spoiled one at a time (a column short, the wrong dtype, on the wrong
device), which the op must refuse with an error naming them. Every unit's suite builds its
error cases with `error_case` and spoils their arguments with `spoil`."""
from course.cases import Case


def error_case(name, words, hint, arguments, device="cpu", group="", shape=(4, 64), **params):
    """Arguments the op must refuse with an error naming `words` and no other of its `arguments`
    (the op's, the one the others are checked against first: it may follow `words`): a case of
    `shape`, in `group` (f"{device}_errors" unless given), whose params say what is spoiled
    (`bad`: {argument: function of its tensor}, applied by `spoil`)."""
    return Case(name, group or f"{device}_errors", device, 0.5, dict(shape=shape, **params), kind="error",
                error_words=words, error_arguments=tuple(arguments), hint=hint)


def spoil(case, inputs):
    """An error case's spoiled arguments (params["bad"]), made on the device, where the op will
    see them."""
    for name, spoiled in case.params.get("bad", {}).items():
        inputs[name] = spoiled(inputs[name])
    return inputs
