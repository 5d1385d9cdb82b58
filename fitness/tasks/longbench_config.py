"""LongBench's per-subset settings for the 16 English subsets EvolKV reports: the official prompt
templates (``config/dataset2prompt.json``), maximum generation lengths (``dataset2maxlen.json``)
and metrics (``eval.py``) of THUDM/LongBench."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Subset:
    template: str  # holds "{context}" and (except a few) "{input}", which comes after the context
    max_new_tokens: int
    metric: str


_ANSWER_PASSAGES = (
    "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\n"
    "The following are given passages.\n{context}\n\n"
    "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\n"
    "Question: {input}\nAnswer:"
)
_QASPER_RULES = (
    "Answer the question as concisely as you can, using a single phrase or sentence if possible. "
    "If the question cannot be answered based on the information in the article, write \"unanswerable\". "
    "If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation."
)

SUBSETS: dict[str, Subset] = {
    "narrativeqa": Subset(
        "You are given a story, which can be either a novel or a movie script, and a question. Answer the question "
        "as concisely as you can, using a single phrase if possible. "
        "Do not provide any explanation.\n\nStory: {context}\n\n"
        "Now, answer the question based on the story as concisely as you can, using a single phrase if possible. "
        "Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:",
        128,
        "qa_f1",
    ),
    "qasper": Subset(
        "You are given a scientific article and a question. " + _QASPER_RULES + "\n\nArticle: {context}\n\n "
        + _QASPER_RULES.replace("Answer the question as", "Answer the question based on the above article as")
        + "\n\nQuestion: {input}\n\nAnswer:",
        128,
        "qa_f1",
    ),
    "multifieldqa_en": Subset(
        "Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following question based on the "
        "above text, only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
        64,
        "qa_f1",
    ),
    "hotpotqa": Subset(_ANSWER_PASSAGES, 32, "qa_f1"),
    "2wikimqa": Subset(_ANSWER_PASSAGES, 32, "qa_f1"),
    "musique": Subset(_ANSWER_PASSAGES, 32, "qa_f1"),
    "gov_report": Subset(
        "You are given a report by a government agency. Write a "
        "one-page summary of the report.\n\nReport:\n{context}\n\n"
        "Now, write a one-page summary of the report.\n\nSummary:",
        512,
        "rouge_l",
    ),
    "qmsum": Subset(
        "You are given a meeting transcript and a query containing a question or instruction. Answer the query in one "
        "or more sentences.\n\nTranscript:\n{context}\n\nNow, "
        "answer the query based on the above meeting transcript in "
        "one or more sentences.\n\nQuery: {input}\nAnswer:",
        512,
        "rouge_l",
    ),
    "multi_news": Subset(
        "You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}\n\n"
        "Now, write a one-page summary of all the news.\n\nSummary:",
        512,
        "rouge_l",
    ),
    "trec": Subset(
        "Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n{input}",
        64,
        "classification",
    ),
    "triviaqa": Subset(
        "Answer the question based on the given passage. Only give me the answer and do not output any other words. "
        "The following are some examples.\n\n{context}\n\n{input}",
        32,
        "qa_f1",
    ),
    "samsum": Subset(
        "Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}\n\n{input}",
        128,
        "rouge_l",
    ),
    "passage_count": Subset(
        "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read "
        "these paragraphs and determine how many unique paragraphs "
        "there are after removing duplicates. In other words, "
        "how many non-repeating paragraphs are there in total?\n\n{context}\n\nPlease enter the final count of unique "
        "paragraphs after removing duplicates. The output format should only contain the number, such as 1, 2, 3, and "
        "so on.\n\nThe final answer is: ",
        32,
        "count",
    ),
    "passage_retrieval_en": Subset(
        "Here are 30 paragraphs from Wikipedia, along with an "
        "abstract. Please determine which paragraph the abstract is "
        "from.\n\n{context}\n\nThe following is an "
        "abstract.\n\n{input}\n\nPlease enter the number of the paragraph that "
        "the abstract is from. The answer format must be like "
        "\"Paragraph 1\", \"Paragraph 2\", etc.\n\nThe answer is: ",
        32,
        "retrieval",
    ),
    "lcc": Subset("Please complete the code given below. \n{context}Next line of code:\n", 64, "code_sim"),
    "repobench-p": Subset("Please complete the code given below. \n{context}{input}Next line of code:\n", 64,
                          "code_sim"),
}

# LongBench scores only the first line of these answers (few-shot tasks that keep going).
FIRST_LINE_ONLY = frozenset({"trec", "triviaqa", "samsum"})
# Few-shot and code subsets are run without the chat template even for chat models.
NO_CHAT_TEMPLATE = frozenset({"trec", "triviaqa", "samsum", "lcc", "repobench-p"})


def canonical_subset(name: str) -> str | None:
    """The official subset id for ``name``, forgiving case, "-" and "_" ("MultiFieldQA-en")."""
    squash = name.lower().replace("-", "").replace("_", "")
    for subset in SUBSETS:
        if subset.replace("-", "").replace("_", "") == squash:
            return subset
    return None
