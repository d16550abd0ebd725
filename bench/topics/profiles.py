"""Interest profiles for the curated topics of `topics.json` (the narrow-topic relevance benchmark, bench/finer.py).

Written on 2026-12-07 by the helper session that collected the topics, after the topic lists were chosen and before
anything was ranked or measured. Each profile was written from the topic's name and its list's own README (title,
introduction, table of contents) only: not from the papers the benchmark draws, and not from any ranking. They are
phrased the way a researcher fills in a newsletter's boxes: a few keywords as they would be typed, and one sentence "in
your own words". They are not to be changed after measuring: a new wording is a new set, written as blind as this one.

PROFILES maps a topic name (as in topics.json) to {"keywords": [...], "sentence": "..."}.
"""

PROFILES: dict[str, dict[str, object]] = {
    "Speculative decoding": {
        "keywords": ["speculative decoding", "draft model", "draft-then-verify", "LLM inference acceleration",
                     "lossless decoding speedup", "token tree verification", "self-speculative decoding"],
        "sentence": ("Methods that speed up large language model generation by letting a cheap drafter propose "
                     "several tokens that the target model verifies in parallel, without changing the output "
                     "distribution."),
    },
    "Diffusion language models": {
        "keywords": ["diffusion language models", "discrete diffusion", "masked diffusion language model",
                     "non-autoregressive text generation", "LLaDA", "block diffusion", "parallel decoding"],
        "sentence": ("Language models that generate text by iteratively denoising masked or noisy token sequences "
                     "instead of left-to-right autoregression: how to train them, speed up their sampling, and "
                     "extend them to multimodal inputs."),
    },
    "LLM unlearning": {
        "keywords": ["machine unlearning", "LLM unlearning", "forgetting hazardous knowledge", "right to be forgotten",
                     "unlearning benchmark", "removing memorized data"],
        "sentence": ("Techniques for making a trained large language model forget specific data, facts or "
                     "capabilities (copyrighted text, private information, hazardous knowledge) without retraining "
                     "from scratch, and ways to check that the forgetting really happened."),
    },
    "Jailbreak attacks on LLMs": {
        "keywords": ["jailbreak", "adversarial prompts", "red teaming", "attacks on safety alignment",
                     "prompt injection", "harmful content generation", "jailbreak defense"],
        "sentence": ("Attacks that get aligned language models to produce harmful or forbidden output through "
                     "crafted prompts, adversarial suffixes or multi-turn manipulation, and how such jailbreaks are "
                     "evaluated."),
    },
    "Efficient reasoning in LLMs": {
        "keywords": ["efficient reasoning", "overthinking", "chain-of-thought compression",
                     "reasoning length reduction", "length penalty reward", "adaptive thinking", "concise reasoning"],
        "sentence": ("Making reasoning models like o1 and DeepSeek-R1 think more economically: shorter or adaptive "
                     "chains of thought that keep accuracy while cutting the tokens and latency spent on reasoning."),
    },
    "Reinforcement learning for large reasoning models": {
        "keywords": ["reinforcement learning with verifiable rewards", "RLVR", "GRPO", "large reasoning models",
                     "policy optimization for LLM reasoning", "reward design", "test-time scaling"],
        "sentence": ("Using reinforcement learning to train language models to reason on math, code and agentic "
                     "tasks: reward signals, policy optimization algorithms such as GRPO, training recipes, and what "
                     "RL actually teaches the model."),
    },
    "Model merging": {
        "keywords": ["model merging", "task arithmetic", "weight averaging", "merging fine-tuned models",
                     "task vectors", "parameter interference", "model soup"],
        "sentence": ("Combining several fine-tuned models into one by operating directly on their weights, without "
                     "the original training data, for LLMs, multimodal models and beyond."),
    },
    "Language models for code": {
        "keywords": ["code generation", "code LLM", "program synthesis", "software engineering agents", "code repair",
                     "SWE-bench", "code benchmarks"],
        "sentence": ("Large language models that write, repair and reason about source code, from code generation "
                     "benchmarks to agents that resolve real software engineering issues."),
    },
    "GUI agents": {
        "keywords": ["GUI agent", "computer-use agent", "web agent", "mobile app agent", "GUI grounding",
                     "screen understanding", "OS automation"],
        "sentence": ("Agents built on multimodal language models that operate graphical user interfaces (websites, "
                     "phone apps, desktop software) by looking at the screen and clicking and typing to complete "
                     "a user's task."),
    },
    "Memory for LLM agents": {
        "keywords": ["agent memory", "long-term memory", "memory-augmented LLM agents", "context management",
                     "personalization memory", "learning from experience", "memory retrieval"],
        "sentence": ("How LLM-based agents store, organize, retrieve and update memories across long interactions, "
                     "so that they can personalize, learn from past experience and handle long-horizon tasks."),
    },
    "Agentic deep research": {
        "keywords": ["deep research agent", "agentic search", "search-augmented reasoning", "web browsing agent",
                     "multi-hop information seeking", "research report generation", "Search-R1"],
        "sentence": ("LLM agents that autonomously search the web, read sources and reason over many steps to answer "
                     "hard questions or write research reports, and the reinforcement learning and benchmarks "
                     "behind them."),
    },
    "Industrial anomaly detection": {
        "keywords": ["industrial anomaly detection", "defect detection", "anomaly segmentation", "MVTec AD",
                     "zero-shot anomaly detection", "unsupervised anomaly localization", "3D anomaly detection"],
        "sentence": ("Detecting and localizing defects in images of manufactured products, mostly learned from "
                     "normal samples only, including zero-shot methods with vision-language models and 3D "
                     "inspection."),
    },
    "Video diffusion models": {
        "keywords": ["video diffusion", "text-to-video generation", "video editing", "image-to-video",
                     "controllable video generation", "long video generation", "video generation model"],
        "sentence": ("Diffusion models that generate and edit video: text-to-video and image-to-video foundation "
                     "models, motion and camera control, long video synthesis, and faster sampling."),
    },
    "Autoregressive models in vision": {
        "keywords": ["autoregressive image generation", "visual tokenizer", "next-token prediction for images",
                     "next-scale prediction", "masked autoregressive", "discrete image tokens",
                     "autoregressive video generation"],
        "sentence": ("Generating images and video with autoregressive models that predict visual tokens step by "
                     "step, and the tokenizers and architectures that make them competitive with diffusion."),
    },
    "Unified multimodal understanding and generation": {
        "keywords": ["unified multimodal model", "multimodal understanding and generation", "any-to-any model",
                     "interleaved image-text generation", "autoregressive and diffusion hybrid",
                     "image generation with MLLMs"],
        "sentence": ("Single models that both understand and generate images and text, combining multimodal LLMs "
                     "with autoregressive or diffusion image generation."),
    },
    "Token reduction": {
        "keywords": ["token pruning", "token merging", "visual token compression", "token reduction",
                     "efficient vision transformer", "KV token eviction", "efficient multimodal LLM inference"],
        "sentence": ("Cutting the number of tokens a transformer has to process (pruning, merging or compressing "
                     "visual and text tokens) to make vision transformers, multimodal LLMs and generative models "
                     "faster."),
    },
    "Human motion": {
        "keywords": ["human motion generation", "text-to-motion", "human-object interaction", "motion diffusion model",
                     "human pose estimation", "humanoid motion", "motion capture"],
        "sentence": ("Modeling how people move: generating and editing 3D human motion from text, music or speech, "
                     "interaction with objects and scenes, and recovering motion from video."),
    },
    "Talking head generation": {
        "keywords": ["talking head generation", "audio-driven facial animation", "portrait animation", "lip sync",
                     "talking face video", "face reenactment"],
        "sentence": ("Generating video of a speaking face from a single portrait, driven by audio or by another "
                     "video, with accurate lip sync and natural expressions and head motion."),
    },
    "LLMs for autonomous driving": {
        "keywords": ["LLM for autonomous driving", "vision-language models for driving",
                     "end-to-end autonomous driving", "driving scene understanding", "vision-language-action driving",
                     "motion planning with language models", "driving question answering"],
        "sentence": ("Using large language and vision-language models in self-driving: understanding driving scenes, "
                     "reasoning about them in language, and planning or controlling the vehicle end to end."),
    },
    "Continual learning": {
        "keywords": ["continual learning", "incremental learning", "catastrophic forgetting",
                     "class-incremental learning", "lifelong learning", "rehearsal-free continual learning"],
        "sentence": ("Training models on a sequence of tasks or classes without forgetting what they learned before, "
                     "for image classifiers as well as pretrained vision-language and language models."),
    },
}
