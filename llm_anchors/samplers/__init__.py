"""Kinds of input: text, rows, images; each its instance, sampler, classifier and memory features."""

from .base import Instance, Refines, Sampler
from .embedder import SentenceEmbedder
from .image import ImageClassifier, ImageInstance, ImageMemoryFeatures, ImageSampler
from .infill import Filler
from .similar import Similar
from .tabular import TabularClassifier, TabularInstance, TabularMemoryFeatures, TabularSampler
from .text import TextSampler
from .text_instance import TextInstance
from .text_memory import TextMemoryFeatures

__all__ = [
    "Filler",
    "ImageClassifier",
    "ImageInstance",
    "ImageMemoryFeatures",
    "ImageSampler",
    "Instance",
    "Refines",
    "Sampler",
    "SentenceEmbedder",
    "Similar",
    "TabularClassifier",
    "TabularInstance",
    "TabularMemoryFeatures",
    "TabularSampler",
    "TextInstance",
    "TextMemoryFeatures",
    "TextSampler",
]
