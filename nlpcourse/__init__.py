"""nlpcourse: the reference implementation of the course *NLP, from n-grams to transformers*."""
