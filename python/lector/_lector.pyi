# Types of the extension module built from crates/lector-py. The documented, typed API is in
# lector/__init__.py; these are the raw calls it translates to (dicts with the fields of the CLI's --json).
from os import PathLike
from typing import Callable, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

_Path = Union[str, PathLike[str]]
_Filter = Union[str, Mapping[str, Any], None]

class LectorError(Exception): ...

class Index:
    def __init__(
        self, path: _Path, *, dense: bool = ..., embedder: Optional[_Path] = ..., passage_words: Optional[int] = ...,
        tfidf: bool = ...,
    ) -> None: ...
    @property
    def path(self) -> str: ...
    def add_documents(
        self, documents: Sequence[Mapping[str, Any]], *, fields: Optional[Mapping[str, Any]] = ..., progress: bool = ...
    ) -> Dict[str, int]: ...
    def add_files(
        self, paths: List[_Path], *, fields: Optional[Mapping[str, Any]] = ..., strict: bool = ..., progress: bool = ...
    ) -> Dict[str, int]: ...
    def delete(self, ids: List[str]) -> int: ...
    def search(
        self, query: str, k: int = ..., *, mode: Optional[str] = ..., filter: _Filter = ...,
        vector: Optional[List[float]] = ..., documents: bool = ...,
    ) -> List[Dict[str, Any]]: ...
    def documents(self, *, filter: _Filter = ...) -> List[Dict[str, Any]]: ...
    def count(self, *, filter: _Filter = ...) -> int: ...
    def stats(self) -> Dict[str, Any]: ...
    def reload(self) -> None: ...

class Embedder:
    def __init__(self, model: Optional[str] = ...) -> None: ...
    @property
    def model(self) -> str: ...
    @property
    def dim(self) -> int: ...
    def embed(self, texts: List[str]) -> List[List[float]]: ...
    def embed_queries(self, queries: List[str]) -> List[List[float]]: ...

class Generator:
    def __init__(
        self, model: Optional[str] = ..., *, endpoint: Optional[str] = ..., api_model: Optional[str] = ...,
        api_key: Optional[str] = ..., timeout: float = ..., api_context: int = ...,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def context_window(self) -> int: ...
    def chat(
        self, messages: List[Dict[str, str]], *, temperature: float = ..., top_p: float = ..., seed: int = ...,
        max_new_tokens: Optional[int] = ..., stop: List[str] = ..., repeat_penalty: float = ...,
        on_token: Optional[Callable[[str], None]] = ...,
    ) -> Dict[str, Any]: ...

class Reader:
    def __init__(self, model: Optional[_Path] = ...) -> None: ...
    @property
    def model_dir(self) -> str: ...
    def read_pairs(
        self,
        pairs: List[Tuple[str, str]],
        *,
        top_k: int = ...,
        handle_impossible_answer: bool = ...,
        max_seq_len: int = ...,
        doc_stride: int = ...,
        max_question_len: int = ...,
        max_answer_len: int = ...,
        batch_size: int = ...,
        progress: bool = ...,
    ) -> List[Dict[str, Any]]: ...

class Pipeline:
    def __init__(
        self,
        index: Index,
        reader: Optional[Reader] = ...,
        *,
        mode: Optional[str] = ...,
        filter: _Filter = ...,
        rerank: Optional[_Path] = ...,
        rerank_depth: int = ...,
    ) -> None: ...
    @property
    def index(self) -> Index: ...
    def ask_many(
        self, questions: List[str], options: Optional[Dict[str, Any]] = ..., progress: bool = ...
    ) -> List[Dict[str, Any]]: ...
    def answer_passages(
        self, question: str, hits: Sequence[Mapping[str, Any]], options: Optional[Dict[str, Any]] = ...
    ) -> Dict[str, Any]: ...
    def ask_hops(
        self, question: str, options: Optional[Dict[str, Any]] = ..., *, second_hop: str = ...,
        beam: Optional[int] = ..., paths: Optional[int] = ..., stop_confidence: Optional[float] = ...,
        decompose: str = ..., generator_model: Optional[str] = ..., endpoint: Optional[str] = ...,
        api_model: Optional[str] = ...,
    ) -> Dict[str, Any]: ...
    def generate(
        self,
        question: str,
        options: Optional[Dict[str, Any]] = ...,
        *,
        closed_book: bool = ...,
        prompt: Optional[str] = ...,
        examples: Optional[str] = ...,
        shots: int = ...,
        select: str = ...,
        generator_model: Optional[str] = ...,
        endpoint: Optional[str] = ...,
        api_model: Optional[str] = ...,
        api_key: Optional[str] = ...,
        timeout: float = ...,
        api_context: int = ...,
        temperature: float = ...,
        top_p: float = ...,
        seed: int = ...,
        beams: Optional[int] = ...,
        length_penalty: float = ...,
        max_new_tokens: Optional[int] = ...,
        stop: List[str] = ...,
        repeat_penalty: float = ...,
        on_token: Optional[Callable[[str], None]] = ...,
    ) -> Dict[str, Any]: ...

def calibrate(
    index: Index,
    squad: str,
    *,
    target: str = ...,
    confidence: str = ...,
    retrieve: Optional[int] = ...,
    limit: Optional[int] = ...,
    evaluate: bool = ...,
    dry_run: bool = ...,
    reader: Optional[str] = ...,
    mode: Optional[str] = ...,
    progress: bool = ...,
    html: Optional[str] = ...,
) -> Dict[str, Any]: ...
def odqa(
    pipeline: Pipeline,
    data: str,
    *,
    k: int = ...,
    limit: Optional[int] = ...,
    squad: bool = ...,
    vote: bool = ...,
    rank_prior: float = ...,
    ambiguity_odds: float = ...,
    resamples: int = ...,
    confidence: float = ...,
    seed: int = ...,
    per_question: bool = ...,
    progress: bool = ...,
    by: Sequence[str] = ...,
    overlap_bins: int = ...,
    low_overlap: float = ...,
    html: Optional[str] = ...,
) -> Dict[str, Any]: ...
def adversarial(
    reader: Reader,
    data: str,
    *,
    limit: Optional[int] = ...,
    kinds: Sequence[str] = ...,
    positions: Sequence[str] = ...,
    candidates: int = ...,
    distractor_seed: int = ...,
    resamples: int = ...,
    confidence: float = ...,
    seed: int = ...,
    per_question: bool = ...,
    progress: bool = ...,
    html: Optional[str] = ...,
) -> Dict[str, Any]: ...
def generate_questions(
    pipeline: Pipeline,
    *,
    per_passage: int = ...,
    limit_passages: Optional[int] = ...,
    min_f1: float = ...,
    k: int = ...,
    progress: bool = ...,
) -> Dict[str, Any]: ...
def generative(
    data: str,
    *,
    squad: bool = ...,
    closed_book: bool = ...,
    limit: Optional[int] = ...,
    prompt: Optional[str] = ...,
    examples: Optional[str] = ...,
    shots: int = ...,
    select: str = ...,
    generator_model: Optional[str] = ...,
    max_new_tokens: Optional[int] = ...,
    reader: bool = ...,
    reader_model: Optional[str] = ...,
    judge_model: Optional[str] = ...,
    judge_endpoint: Optional[str] = ...,
    judge_api_model: Optional[str] = ...,
    judge_api_key: Optional[str] = ...,
    per_question: bool = ...,
    progress: bool = ...,
) -> Dict[str, Any]: ...
def rag(
    data: str,
    index: str,
    *,
    k: int = ...,
    limit: Optional[int] = ...,
    withhold_every: Optional[int] = ...,
    order: str = ...,
    mode: Optional[str] = ...,
    embedder: Optional[str] = ...,
    rerank: Optional[str] = ...,
    rerank_depth: int = ...,
    prompt: Optional[str] = ...,
    examples: Optional[str] = ...,
    shots: int = ...,
    select: str = ...,
    generator_model: Optional[str] = ...,
    endpoint: Optional[str] = ...,
    api_model: Optional[str] = ...,
    api_key: Optional[str] = ...,
    temperature: float = ...,
    seed: int = ...,
    max_new_tokens: Optional[int] = ...,
    judge_model: Optional[str] = ...,
    judge_endpoint: Optional[str] = ...,
    judge_api_model: Optional[str] = ...,
    judge_api_key: Optional[str] = ...,
    judge_claims: bool = ...,
    bertscore_model: Optional[str] = ...,
    bertscore_layer: Optional[int] = ...,
    resamples: int = ...,
    confidence: float = ...,
    per_question: bool = ...,
    progress: bool = ...,
) -> Dict[str, Any]: ...
def hotpot_run(
    data: str,
    work_dir: str,
    *,
    setting: str = ...,
    index: Optional[str] = ...,
    k: int = ...,
    offset: int = ...,
    limit: Optional[int] = ...,
    hops: int = ...,
    second_hop: str = ...,
    beam: Optional[int] = ...,
    paths: Optional[int] = ...,
    stop_confidence: Optional[float] = ...,
    decompose: str = ...,
    reader: Optional[str] = ...,
    mode: Optional[str] = ...,
    embedder: Optional[str] = ...,
    rerank: Optional[str] = ...,
    rerank_depth: int = ...,
    resamples: int = ...,
    confidence: float = ...,
    per_question: bool = ...,
    predictions: bool = ...,
    html: Optional[str] = ...,
    progress: bool = ...,
) -> Dict[str, Any]: ...
def equivalence(
    items: Sequence[Mapping[str, Any]],
    *,
    judge_model: Optional[str] = ...,
    judge_endpoint: Optional[str] = ...,
    judge_api_model: Optional[str] = ...,
    judge_api_key: Optional[str] = ...,
) -> Dict[str, Any]: ...
def compare(
    a: Any,
    b: Any,
    *,
    metric: str = ...,
    trials: int = ...,
    resamples: int = ...,
    confidence: float = ...,
    seed: int = ...,
) -> Dict[str, Any]: ...
def squad(
    dataset: Mapping[str, Any],
    predictions: Sequence[Tuple[str, str]],
    na_probs: Optional[Sequence[Tuple[str, float]]] = ...,
    na_prob_thresh: float = ...,
    *,
    by: Sequence[str] = ...,
    overlap_bins: int = ...,
    low_overlap: float = ...,
    resamples: int = ...,
    confidence: float = ...,
    seed: int = ...,
    html: Optional[str] = ...,
) -> Dict[str, Any]: ...
def retrieval_run(
    index: Index,
    queries: str,
    *,
    qrels: Optional[str] = ...,
    mode: Optional[str] = ...,
    embedder: Optional[str] = ...,
    rerank: Optional[str] = ...,
    rerank_depth: int = ...,
    depth: int = ...,
    ks: List[int] = ...,
    max_k: int = ...,
    resamples: int = ...,
    confidence: float = ...,
    seed: int = ...,
    per_query: bool = ...,
    html: Optional[str] = ...,
    progress: bool = ...,
) -> Dict[str, Any]: ...
def retrieval(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]], ks: Sequence[int] = ...
) -> Dict[str, Any]: ...
def hotpot(gold: Sequence[Mapping[str, Any]], prediction: Mapping[str, Any]) -> Dict[str, float]: ...
def shared_data(relative: str) -> str: ...

def read_log(dir: str) -> List[Dict[str, Any]]: ...
def read_labels(dir: str) -> List[Dict[str, Any]]: ...
def train_reader(
    out: str,
    train: List[str] = ...,
    *,
    resume: bool = ...,
    model: Optional[str] = ...,
    dev: Optional[str] = ...,
    max_seq_len: Optional[int] = ...,
    doc_stride: Optional[int] = ...,
    max_question_len: Optional[int] = ...,
    shared_norm: bool = ...,
    negatives_from: Optional[str] = ...,
    negatives: int = ...,
    negatives_depth: int = ...,
    schedule: Optional[Dict[str, Any]] = ...,
    progress: bool = ...,
) -> Dict[str, Any]: ...
def train_retriever(
    out: str,
    train: List[str] = ...,
    *,
    kind: str = ...,
    resume: bool = ...,
    model: Optional[str] = ...,
    negatives_from: Optional[str] = ...,
    negatives: int = ...,
    negatives_depth: int = ...,
    max_tokens: int = ...,
    scale: float = ...,
    schedule: Optional[Dict[str, Any]] = ...,
    progress: bool = ...,
) -> Dict[str, Any]: ...
def drift(
    dir: str,
    *,
    index: Optional[str] = ...,
    embedder: Optional[str] = ...,
    split: Optional[str] = ...,
    before: Optional[str] = ...,
    after: Optional[str] = ...,
    far_below: float = ...,
    alpha: float = ...,
    min_effect: float = ...,
    html: Optional[str] = ...,
) -> Dict[str, Any]: ...
def export_labels(dir: str, index: Index) -> Dict[str, Any]: ...
def bertscore(
    items: List[Dict[str, Any]], model: str, *, layer: Optional[int] = ..., idf: bool = ...,
    baseline: Optional[str] = ..., resamples: int = ..., confidence: float = ..., seed: int = ...,
    per_item: bool = ...,
) -> Dict[str, Any]: ...
def judge(
    items: List[Dict[str, Any]], *, mode: str = ..., generator_model: Optional[str] = ...,
    endpoint: Optional[str] = ..., api_model: Optional[str] = ..., api_key: Optional[str] = ...,
    concurrency: int = ..., cache: Optional[str] = ..., resamples: int = ..., confidence: float = ...,
    per_item: bool = ...,
) -> Dict[str, Any]: ...
def faithfulness(
    items: List[Dict[str, Any]], *, judge: bool = ..., generator_model: Optional[str] = ...,
    endpoint: Optional[str] = ..., api_model: Optional[str] = ..., api_key: Optional[str] = ...,
    per_claim: bool = ...,
) -> Dict[str, Any]: ...
def canary(
    pipeline: Pipeline, questions: str, *, k: int = ..., baseline: Optional[str] = ...,
    write_baseline: bool = ..., max_f1_drop: float = ..., max_abstain_change: float = ...,
    progress: bool = ...,
) -> Dict[str, Any]: ...
def rouge(
    items: List[Dict[str, Any]], *, stem: bool = ..., resamples: int = ..., confidence: float = ...,
    seed: int = ..., per_item: bool = ...,
    html: Optional[str] = ...,
) -> Dict[str, Any]: ...
