"""What the tests call: vector_add(x, y) and softmax(x)."""
from softmax import softmax
from vector_add import vector_add
